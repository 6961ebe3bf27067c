import { describe, expect, it } from "@jest/globals";
import { connect } from "node:net";
import { DATABASE_KINDS, startTestServer } from "./support/test-server.ts";

/*
 * A request that reaches an instance while it shuts down, on a connection kept alive from before, is answered
 * like any other, with `Connection: close` so that the client's next request opens a connection elsewhere
 * (docs/decisions.md, "Build, process and installation"). Driven over a raw socket so that the second request
 * surely travels on the connection the first one opened.
 */

function request(path: string, apiKey: string, extra = ""): string {
  return `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${apiKey}\r\n${extra}\r\n`;
}

describe.each(DATABASE_KINDS)("graceful shutdown on %s", (kind) => {
  it("answers a request sent on a kept-alive connection during shutdown, and closes the connection", async () => {
    let markHeld!: () => void;
    const held = new Promise<void>((resolve) => (markHeld = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const server = await startTestServer(kind, {
      // Holds the first request open, so that shutdown starts while its connection is busy.
      beforeListen: (app) =>
        app.http.addHook("onRequest", async (incoming) => {
          if (incoming.headers["x-test-hold"] === undefined) return;
          markHeld();
          await released;
        }),
    });
    const { port } = new URL(server.url);
    const socket = connect(Number(port), "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (received += chunk));
    const ended = new Promise<void>((resolve) => socket.on("close", () => resolve()));

    socket.write(request("/v1/tags", server.apiKey, "X-Test-Hold: 1\r\n"));
    await held;
    // Shuts the app down (as SIGTERM does), then drops the test database.
    const closing = server.close();
    while (server.app.http.server.listening) await new Promise((resolve) => setTimeout(resolve, 5));
    socket.write(request("/v1/tags?limit=1", server.apiKey));
    // Sent after shutdown began, so it is routed during shutdown whether the server reads it before or after it
    // answers the first; the pause lets it be read while the first is still held, as a pipelining client's would.
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    await ended;
    await closing;

    const responses = received.split(/(?=HTTP\/1\.1 )/);
    expect(responses.map((response) => response.split("\r\n")[0])).toEqual(["HTTP/1.1 200 OK", "HTTP/1.1 200 OK"]);
    const [headers, body] = responses[1]!.split("\r\n\r\n");
    expect(headers!.toLowerCase()).toContain("connection: close");
    expect(JSON.parse(body!)).toMatchObject({ data: [] });
  });
});
