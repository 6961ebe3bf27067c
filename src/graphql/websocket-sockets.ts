import type { Duplex } from "node:stream";
import type { WebSocket } from "ws";

/** How long shutdown waits for clients to answer the close handshake before dropping their sockets. */
const CLOSE_HANDSHAKE_TIMEOUT_MS = 3_000;

/** Sends a close frame to each socket; drops the ones that have not completed the handshake in time. */
export async function closeSockets(sockets: readonly WebSocket[], code: number, reason: string): Promise<void> {
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          if (socket.readyState === socket.CLOSED) return resolve();
          const timer = setTimeout(() => {
            socket.terminate();
            resolve();
          }, CLOSE_HANDSHAKE_TIMEOUT_MS);
          socket.once("close", () => {
            clearTimeout(timer);
            resolve();
          });
          socket.close(code, reason);
        }),
    ),
  );
}

export function refuseUpgrade(socket: Duplex, status: number, text: string): void {
  socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}
