// Preloaded into a Node server that listens on every interface by default
// (`app.listen(PORT)`): a listen on a bare port binds 127.0.0.1 instead, so
// the tests never open a port to the network.
//
//   node --require loopback.cjs server.js
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const bare = typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port));
  if (bare && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
