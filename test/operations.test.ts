import { createServer } from "node:net";
import { afterEach, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/* `/metrics` guarded by its own token or served on a port of its own; never open in production by default. */

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.each(DATABASE_KINDS)("/metrics on %s", (kind) => {
  let server: TestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it("requires METRICS_TOKEN as a bearer token when it is set, and no API key", async () => {
    server = await startTestServer(kind, { env: { NODE_ENV: "production", METRICS_TOKEN: "s3cret-metrics" } });
    const anonymous = await http(server, "GET", "/metrics", { apiKey: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("www-authenticate")).toBe('Bearer realm="metrics"');
    expect(anonymous.body).toMatchObject({ status: 401, code: "UNAUTHENTICATED" });
    // An API key is not a metrics token.
    const withApiKey = await http(server, "GET", "/metrics", {
      apiKey: null,
      headers: { authorization: `Bearer ${server.apiKey}` },
    });
    expect(withApiKey.status).toBe(401);

    const authorized = await http(server, "GET", "/metrics", {
      apiKey: null,
      headers: { authorization: "Bearer s3cret-metrics" },
    });
    expect(authorized.status).toBe(200);
    expect(String(authorized.body)).toContain("reftrail_http_request_duration_seconds");
    expect((await http(server, "GET", "/healthz", { apiKey: null })).status).toBe(200);
  });

  it("serves metrics only on METRICS_PORT when it is set, and frees that port on close", async () => {
    const port = await freePort();
    server = await startTestServer(kind, { env: { NODE_ENV: "production", METRICS_PORT: String(port) } });
    expect((await http(server, "GET", "/metrics", { apiKey: null })).status).toBe(404);
    const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("process_cpu_user_seconds_total");

    await server.close();
    server = undefined;
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
  });

  it("does not serve metrics in production without a token or a port of their own", async () => {
    server = await startTestServer(kind, { env: { NODE_ENV: "production" } });
    expect((await http(server, "GET", "/metrics", { apiKey: null })).status).toBe(404);
    expect((await http(server, "GET", "/readyz", { apiKey: null })).status).toBe(200);
  });
});
