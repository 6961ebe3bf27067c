import { afterEach, describe, expect, it } from "@jest/globals";
import Fastify, { type FastifyInstance } from "fastify";
import { Registry } from "prom-client";
import { ReadAdmissionGate } from "../pipeline/admission/read-admission-gate.ts";
import { registerReadAdmission } from "./read-admission.hooks.ts";

/*
 * The gate on a real Fastify server over loopback HTTP. One read at a time, so that a second read waits while the
 * first one is held open by the test; the waiting read's client then goes away.
 */

interface Gated {
  readonly app: FastifyInstance;
  readonly origin: string;
  readonly registry: Registry;
  /** Reads whose handler ran, by path. */
  readonly ran: string[];
  /** Resolves once the held read's handler is running. */
  readonly holding: Promise<void>;
  /** Lets the held read answer. */
  release(): void;
  /** Resolves once the server has seen the connection of the next request to `path` close. */
  closedOnServer(path: string): Promise<void>;
}

let current: Gated | null = null;

afterEach(async () => {
  current?.release();
  await current?.app.close();
  current = null;
});

async function startGated(): Promise<Gated> {
  const registry = new Registry();
  const gate = new ReadAdmissionGate({ readsPerTurn: 1, maxReadsInFlight: 1, turnTargetMs: 0 }, registry);
  const app = Fastify({ logger: false });
  registerReadAdmission(app, gate);
  const ran: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let markHolding!: () => void;
  const holding = new Promise<void>((resolve) => (markHolding = resolve));
  const closeWatchers = new Map<string, () => void>();
  app.addHook("onRequest", async (request, reply) => {
    const watcher = closeWatchers.get(request.url);
    if (watcher) reply.raw.once("close", watcher);
  });
  app.get("/v1/held", async () => {
    ran.push("/v1/held");
    markHolding();
    await released;
    return { held: true };
  });
  app.get("/v1/count", async () => {
    ran.push("/v1/count");
    return { counted: true };
  });
  app.post("/graphql", async (_request, reply) => {
    await gate.holdRead(reply.raw);
    ran.push("/graphql");
    return { data: { ok: true } };
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as { port: number };
  current = {
    app,
    origin: `http://127.0.0.1:${port}`,
    registry,
    ran,
    holding,
    release,
    closedOnServer: (path) => new Promise<void>((resolve) => closeWatchers.set(path, resolve)),
  };
  return current;
}

async function abandonedCount(registry: Registry): Promise<number> {
  const metric = await registry.getSingleMetric("reftrail_reads_abandoned_total")!.get();
  return metric.values[0]?.value ?? 0;
}

describe("read admission gate", () => {
  it.each([
    ["a REST read", "/v1/count", {}],
    [
      "a GraphQL query",
      "/graphql",
      { method: "POST", headers: { "content-type": "application/json" }, body: '{"query":"{ ok }"}' },
    ],
  ] as const)(
    "drops %s whose client left while it waited, and serves the reads after it",
    async (_label, path, init) => {
      const gated = await startGated();
      const held = fetch(`${gated.origin}/v1/held`);
      await gated.holding;

      const leaving = new AbortController();
      const closed = gated.closedOnServer(path);
      const left = fetch(`${gated.origin}${path}`, { ...init, signal: leaving.signal }).then(
        () => "answered",
        (error: Error) => error.name,
      );
      // The read has reached the server and waits: the only place is held.
      while ((await gated.registry.getSingleMetric("reftrail_reads_waiting")!.get()).values[0]?.value !== 1) {
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      leaving.abort();
      expect(await left).toBe("AbortError");
      await closed;

      gated.release();
      expect((await held).status).toBe(200);
      const after = await fetch(`${gated.origin}${path}`, init);
      expect(after.status).toBe(200);

      expect(gated.ran).toEqual(["/v1/held", path]);
      expect(await abandonedCount(gated.registry)).toBe(1);
    },
  );

  it("runs a waiting read whose client stays, once a place is free", async () => {
    const gated = await startGated();
    const held = fetch(`${gated.origin}/v1/held`);
    await gated.holding;
    const waiting = fetch(`${gated.origin}/v1/count`);
    while ((await gated.registry.getSingleMetric("reftrail_reads_waiting")!.get()).values[0]?.value !== 1) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(gated.ran).toEqual(["/v1/held"]);

    gated.release();
    expect((await held).status).toBe(200);
    expect((await waiting).status).toBe(200);
    expect(gated.ran).toEqual(["/v1/held", "/v1/count"]);
    expect(await abandonedCount(gated.registry)).toBe(0);
  });
});
