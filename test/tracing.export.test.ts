import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { startServerProcess } from "./support/server-process.ts";
import { createTestDatabase, type TestDatabase } from "./support/test-server.ts";
import { eventually } from "./support/webhooks.ts";

/*
 * Tracing as an operator turns it on: the server process with OTEL_EXPORTER_OTLP_ENDPOINT set exports its spans
 * over OTLP/HTTP to that collector, named after OTEL_SERVICE_NAME; with the batch's delay set far beyond the test,
 * the spans arrive only because a graceful shutdown exports what is buffered.
 */

interface Export {
  readonly path: string;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

describe("traces exported over OTLP", () => {
  let database: TestDatabase;
  let collector: Server;
  const exports: Export[] = [];

  beforeAll(async () => {
    database = await createTestDatabase("sqlite");
    collector = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        exports.push({
          path: request.url ?? "",
          contentType: request.headers["content-type"],
          body: Buffer.concat(chunks),
        });
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => collector?.close(() => resolve()));
    await database?.drop();
  });

  it("sends the spans buffered when the server shuts down, under OTEL_SERVICE_NAME", async () => {
    const { port } = collector.address() as AddressInfo;
    const server = await startServerProcess({
      DATABASE_URL: database.url,
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
      OTEL_SERVICE_NAME: "reftrail-export-test",
      OTEL_BSP_SCHEDULE_DELAY: "600000",
    });
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(exports).toEqual([]);

    server.child.kill("SIGTERM");
    expect(await server.exited()).toBe(0);
    await eventually(async () => exports.length > 0, 10_000, "an export");
    const [sent] = exports;
    expect(sent!.path).toBe("/v1/traces");
    expect(sent!.contentType).toBe("application/json");
    const text = sent!.body.toString("utf8");
    expect(text).toContain('"stringValue":"reftrail-export-test"');
    expect(text).toContain('"name":"GET /healthz"');
  });
});
