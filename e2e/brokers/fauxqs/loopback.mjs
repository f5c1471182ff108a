// Preload: force every TCP listener of this process onto 127.0.0.1.
//
// fauxqs 2.4.1 hard-codes `app.listen({ port, host: "0.0.0.0" })` in startFauxqs()
// (node_modules/fauxqs/dist/app.js); its `host` option only changes the host
// written into queue URLs. This module rewrites the host of every
// net.Server.prototype.listen call (0.0.0.0, ::, localhost, or none) to
// 127.0.0.1. Unix-socket and handle listens are left alone.
//
// Use: `node --import ./loopback.mjs ...` or import it before anything listens.
import net from "node:net";

const LOOPBACK = process.env.QBRIDGE_LISTEN_HOST || "127.0.0.1";
const origListen = net.Server.prototype.listen;

function isPortLike(v) {
  return typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v));
}

net.Server.prototype.listen = function patchedListen(...args) {
  const first = args[0];
  if (first !== null && typeof first === "object" && !Array.isArray(first)) {
    // listen(options[, cb]); leave path / handle / fd listens untouched
    if (first.path === undefined && first.handle === undefined && first._handle === undefined && first.fd === undefined) {
      args[0] = { ...first, host: LOOPBACK };
    }
  } else if (isPortLike(first) || first === undefined || typeof first === "function") {
    // listen([port[, host[, backlog]]][, cb])
    if (typeof first === "function" || first === undefined) {
      args.splice(0, first === undefined ? 1 : 0, 0);
    }
    if (typeof args[1] === "string" || args[1] === undefined || args[1] === null) {
      args[1] = LOOPBACK;
    } else {
      args.splice(1, 0, LOOPBACK);
    }
  }
  return origListen.apply(this, args);
};
