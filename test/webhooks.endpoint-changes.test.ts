import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Prisma } from "../src/store/sql/sql-template.ts";
import { containerNumber } from "./support/container-numbers.ts";
import { expectStatus, http } from "./support/http.ts";
import {
  DATABASE_KINDS,
  startInstanceOn,
  startTestServer,
  type DatabaseKind,
  type TestServer,
} from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually } from "./support/webhooks.ts";

/*
 * After a disable, a delete or a URL change has been acknowledged, no request starts toward the old state
 * (docs/decisions.md, "Endpoint changes stop the requests claimed ahead"). The worker claims ahead: here every
 * delivery of the endpoint is claimed, the first PER_ENDPOINT requests are held unanswered by the receiver (so
 * nothing is being started when the change is made) and the rest wait in the worker's queue. The answers are let
 * go after the acknowledgement: what the worker starts from its queue then must follow the change.
 *
 * On PostgreSQL the change goes through another instance than the one sending (two instances on one database,
 * the API's without a worker): nothing in the sender's process hears of it but the database.
 */

const PER_ENDPOINT = 3;
/** One reference and its children: every one claimed at once (the worker claims 4 rounds ahead per endpoint). */
const EVENTS = 4 * PER_ENDPOINT;
const WAITING = EVENTS - PER_ENDPOINT;

describe.each(DATABASE_KINDS)("endpoint changes and the deliveries claimed ahead, on %s", (kind: DatabaseKind) => {
  let api: TestServer;
  let worker: TestServer;
  let receiver: WebhookReceiver;
  let serial = 0;
  const workerEnv = { WEBHOOK_CONCURRENCY_PER_ENDPOINT: String(PER_ENDPOINT), WEBHOOK_POLL_INTERVAL: "100ms" };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    if (kind === "sqlite") {
      api = worker = await startTestServer(kind, { env: workerEnv });
    } else {
      api = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
      worker = await startInstanceOn(api, { env: workerEnv });
    }
  });
  afterAll(async () => {
    await receiver?.close();
    if (worker !== api) await worker?.close();
    await api?.close();
  });

  async function failedMetric(reason: string): Promise<number> {
    const metrics = (await http(worker, "GET", "/metrics", { apiKey: null })).body as string;
    const line = new RegExp(`reftrail_webhook_deliveries_failed_total\\{reason="${reason}"\\} (\\d+)`).exec(metrics);
    return Number(line?.[1] ?? 0);
  }

  /**
   * An endpoint on `path` whose first PER_ENDPOINT requests are held until the returned `answer()`, with EVENTS
   * deliveries all claimed by the worker: PER_ENDPOINT on the wire, the rest waiting in its queue.
   */
  async function endpointWithClaimsAhead(path: string): Promise<{ id: string; secret: string; answer(): void }> {
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    receiver.respond(path, ({ count }) => (count <= PER_ENDPOINT ? { until: answered } : {}));
    const endpoint = await createEndpoint(api, { url: receiver.url(path) });
    receiver.verifyWith(path, endpoint.secret);
    const parent = await createReference(api);
    serial += 1;
    const children = await http(api, "POST", `/v1/references/${parent.id}/children`, {
      body: {
        container_ids: Array.from({ length: EVENTS - 1 }, (_, child) =>
          containerNumber("CHGU", serial * 100 + child + (kind === "sqlite" ? 0 : 50_000)),
        ),
      },
    });
    expectStatus(children, 200);
    await receiver.waitForCount(path, PER_ENDPOINT);
    // Every delivery leased: the ones the receiver holds, and the rest waiting in the worker's queue.
    await eventually(
      async () => {
        const [row] = await api.database.sql.all<{ n: number | bigint }>(Prisma.sql`
        SELECT COUNT(*) AS "n" FROM "webhook_deliveries"
        WHERE "endpoint_id" = ${endpoint.id} AND "lease_owner" IS NOT NULL`);
        return Number(row?.n) === EVENTS;
      },
      10_000,
      "every delivery claimed",
    );
    return { id: endpoint.id, secret: endpoint.secret, answer };
  }

  /** The webhook-ids of requests to `path` that arrived after `at` (performance.now() of the acknowledgement). */
  const arrivedAfter = (path: string, at: number) =>
    receiver
      .on(path)
      .filter((hook) => hook.receivedAt > at)
      .map((hook) => hook.webhookId);

  it("starts no request after a disable was acknowledged", async () => {
    const path = `/${kind}/disable`;
    const endpoint = await endpointWithClaimsAhead(path);
    const abandonedBefore = await failedMetric("endpoint_disabled");

    const disabled = await http(api, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { enabled: false } });
    const acknowledgedAt = performance.now();
    expectStatus(disabled, 200);
    endpoint.answer();

    // Each waiting delivery either goes out (late) or is given up by the worker.
    await eventually(
      async () =>
        arrivedAfter(path, acknowledgedAt).length + (await failedMetric("endpoint_disabled")) - abandonedBefore >=
        WAITING,
      15_000,
      "the waiting deliveries to be sent or given up",
    );
    expect(arrivedAfter(path, acknowledgedAt)).toHaveLength(0);
    expect(receiver.on(path)).toHaveLength(PER_ENDPOINT);
  }, 60_000);

  it("starts no request after a delete was acknowledged", async () => {
    const path = `/${kind}/delete`;
    const endpoint = await endpointWithClaimsAhead(path);
    const abandonedBefore = await failedMetric("endpoint_deleted");

    const deleted = await http(api, "DELETE", `/v1/webhooks/${endpoint.id}`);
    const acknowledgedAt = performance.now();
    expectStatus(deleted, 204);
    endpoint.answer();

    await eventually(
      async () =>
        arrivedAfter(path, acknowledgedAt).length + (await failedMetric("endpoint_deleted")) - abandonedBefore >=
        WAITING,
      15_000,
      "the waiting deliveries to be sent or given up",
    );
    expect(arrivedAfter(path, acknowledgedAt)).toHaveLength(0);
    expect(receiver.on(path)).toHaveLength(PER_ENDPOINT);
  }, 60_000);

  it("sends nothing to the old URL after a URL change was acknowledged, and the rest to the new one", async () => {
    const oldPath = `/${kind}/url-old`;
    const newPath = `/${kind}/url-new`;
    const endpoint = await endpointWithClaimsAhead(oldPath);
    receiver.verifyWith(newPath, endpoint.secret);

    const changed = await http(api, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { url: receiver.url(newPath) } });
    const acknowledgedAt = performance.now();
    expectStatus(changed, 200);
    endpoint.answer();

    await eventually(
      async () => arrivedAfter(oldPath, acknowledgedAt).length + receiver.on(newPath).length >= WAITING,
      15_000,
      "the waiting deliveries to be sent",
    );
    expect(arrivedAfter(oldPath, acknowledgedAt)).toHaveLength(0);
    expect(receiver.on(oldPath)).toHaveLength(PER_ENDPOINT);
    const toNew = receiver.on(newPath);
    expect(toNew).toHaveLength(WAITING);
    for (const hook of toNew) expect(hook.verifiedBy).toEqual([endpoint.secret]);
    // Each delivery went out once: the held ones to the old URL, the waiting ones to the new.
    const ids = [...receiver.on(oldPath), ...toNew].map((hook) => hook.webhookId);
    expect(new Set(ids).size).toBe(EVENTS);
  }, 60_000);
});
