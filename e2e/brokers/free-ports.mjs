// Print N distinct TCP ports (one per line) that are free on 127.0.0.1 right now.
// Usage: node free-ports.mjs [N]   (any Node >= 18)
// Candidates are drawn at random from 20000-32767, below Linux's default
// ephemeral range (32768-60999), so an outgoing connection is unlikely to grab
// one between this check and the broker's bind.
import net from "node:net";

const n = Number.parseInt(process.argv[2] ?? "1", 10);
const lo = 20000, hi = 32767;
const held = [];
const ports = [];

function tryBind(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once("error", () => resolve(null));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve(s));
  });
}

for (let attempts = 0; ports.length < n && attempts < 2000; attempts++) {
  const port = lo + Math.floor(Math.random() * (hi - lo + 1));
  if (ports.includes(port)) continue;
  const s = await tryBind(port);
  if (s) { held.push(s); ports.push(port); }
}
await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
if (ports.length < n) { console.error("free-ports: not enough free ports"); process.exit(1); }
console.log(ports.join("\n"));
