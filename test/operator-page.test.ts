import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { describeInBrowser, launchBrowser } from "./support/browser.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { withLabel } from "./support/with-label.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, listDeliveries, type Caller } from "./support/webhooks.ts";

/*
 * The operator page (`/operator`) end to end in headless Chromium, on both databases: a failing endpoint (the
 * receiver answers 500) shows its failure; the receiver is fixed; "Resend" is clicked and the page shows the
 * new, successful attempt without reloading, refreshed by the `webhookDeliveryAttempts` subscription (the page
 * has no polling loop). Every request that leaves 127.0.0.1 is blocked and counted.
 */

const SCREENSHOT = process.env.OPERATOR_SCREENSHOT;

function isLocal(url: string): boolean {
  const { protocol, hostname } = new URL(url);
  return protocol === "data:" || protocol === "blob:" || hostname === "127.0.0.1";
}

describe.each(DATABASE_KINDS)("operator page on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    // One attempt per delivery: a failure stays failed until it is re-sent by hand.
    server = await startTestServer(kind, { env: { WEBHOOK_RETRY_SCHEDULE: "0s", WEBHOOK_POLL_INTERVAL: "100ms" } });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("serves the page and its assets with no reference to another origin", async () => {
    const page = await fetch(`${server.url}/operator`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    const policy = page.headers.get("content-security-policy") ?? "";
    expect(policy).toContain("default-src 'self'");
    // The page keeps the API key in localStorage: it may connect to its own origin only, no WebSocket elsewhere.
    expect(policy.split(";").map((directive) => directive.trim())).toContain("connect-src 'self'");
    expect(policy).not.toMatch(/\bwss?:/);
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//);
    for (const asset of ["operator.js", "operator.css", "graphql-ws.js"]) {
      const response = await fetch(`${server.url}/operator/${asset}`);
      withLabel(asset, () => expect(response.status).toBe(200));
    }
    expect((await fetch(`${server.url}/operator/..%2Fpackage.json`)).status).toBe(404);
  });

  describeInBrowser("in headless Chromium", () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchBrowser();
    }, 60_000);
    afterAll(async () => {
      await browser?.close();
    });

    it("lets the page open a WebSocket to its own origin only", async () => {
      const page = await browser.newPage();
      try {
        const response = await page.goto(`${server.url}/operator`);
        expect(response?.headers()["content-security-policy"]).toContain("connect-src 'self'");
        const port = new URL(server.url).port;
        // Same server, another origin (localhost, not 127.0.0.1): the policy refuses it before it connects; the
        // page's own origin opens. A socket either opens or is refused, so each answer below is final.
        const tryWebSocket = (url: string) =>
          page.evaluate(`new Promise((resolve) => {
            document.addEventListener("securitypolicyviolation", () => resolve("refused"), { once: true });
            const socket = new WebSocket(${JSON.stringify(url)}, "graphql-transport-ws");
            socket.addEventListener("open", () => {
              socket.close();
              resolve("opened");
            });
          })`);
        expect(await tryWebSocket(`ws://localhost:${port}/graphql`)).toBe("refused");
        expect(await tryWebSocket(`ws://127.0.0.1:${port}/graphql`)).toBe("opened");
      } finally {
        await page.close();
      }
    }, 30_000);

    it("says that a delivery is held back behind an earlier delivery of its reference", async () => {
      // A server of its own: its first attempt's retry is an hour away, so what comes after it stays held back.
      const ordered = await startTestServer(kind, {
        env: { WEBHOOK_RETRY_SCHEDULE: "0s,1h", WEBHOOK_POLL_INTERVAL: "100ms" },
      });
      const context = await browser.newContext();
      try {
        const { apiKey } = await ordered.newOrganization("ordered");
        const caller: Caller = { url: ordered.url, apiKey };
        const path = `/${kind}/operator-held`;
        receiver.respond(path, () => ({ status: 503 }));
        const endpoint = await createEndpoint(caller, { url: receiver.url(path), ordering: "reference" });
        const reference = await createReference(caller);
        const extraction = await http(caller, "POST", `/v1/references/${reference.id}/extractions`, {
          body: { status: "succeeded" },
        });
        expect(extraction.status).toBe(201);
        await receiver.waitFor(() => receiver.on(path).length === 1, 15_000);
        const first = receiver.on(path)[0]!.webhookId;
        const deliveries = await eventually(async () => {
          const listed = await listDeliveries(caller, endpoint.id);
          return listed.length === 2 ? listed : null;
        }, 15_000);
        const held = deliveries.find((delivery) => delivery.id !== first)!;

        const page = await context.newPage();
        await page.goto(`${ordered.url}/operator`);
        await page.fill("#api-key", apiKey);
        await page.click("#key-form button[type=submit]");
        await page.waitForSelector("body[data-loaded=true]");
        // The cell under the delivery's status badge says when it goes out, or that it waits.
        const statusCell = (id: string) =>
          page
            .locator(`tr[data-delivery="${id}"] td`)
            .filter({ has: page.locator("[data-testid=delivery-status]") })
            .innerText();
        const heldCell = await statusCell(held.id);
        expect(heldCell).toContain("held back behind an earlier delivery of its reference");
        expect(heldCell).not.toContain("next");
        expect(await statusCell(first)).toMatch(/next \d{4}-/);
      } finally {
        await context.close();
        await ordered.close();
      }
    }, 90_000);

    it("names a broker endpoint by its destination in the deliveries and in the endpoint filter", async () => {
      const context = await browser.newContext();
      try {
        const { apiKey } = await server.newOrganization(`operator-broker-${kind}`);
        const caller: Caller = { url: server.url, apiKey };
        // Nothing listens on port 9: the delivery fails, and its row stays on the page.
        const endpoint = await createEndpoint(caller, {
          destination: { kind: "rabbitmq", url: "amqp://127.0.0.1:9", exchange: "operator-page" },
        });
        await createReference(caller);
        await eventually(async () => ((await listDeliveries(caller, endpoint.id)).length > 0 ? true : null), 15_000);
        const page = await context.newPage();
        await page.goto(`${server.url}/operator`);
        await page.fill("#api-key", apiKey);
        await page.click("#key-form button[type=submit]");
        await page.waitForSelector("body[data-loaded=true]");
        const option = await page.locator(`#filter-endpoint option[value="${endpoint.id}"]`).innerText();
        expect(option).toContain("amqp://127.0.0.1:9");
        expect(option).toContain("exchange operator-page");
        const endpointCell = await page.locator("tr[data-delivery] td.url").first().innerText();
        expect(endpointCell).toContain("amqp://127.0.0.1:9");
      } finally {
        await context.close();
      }
    }, 60_000);

    it("says that a delivery waits for its endpoint's throttle", async () => {
      const context = await browser.newContext();
      try {
        const { apiKey } = await server.newOrganization("throttled");
        const caller: Caller = { url: server.url, apiKey };
        const path = `/${kind}/operator-throttled`;
        // One delivery a second: the others of the backlog wait, due, for their seconds.
        const endpoint = await createEndpoint(caller, { url: receiver.url(path), max_deliveries_per_second: 1 });
        for (let index = 0; index < 10; index++) await createReference(caller);
        await eventually(
          async () => (await listDeliveries(caller, endpoint.id)).some((d) => d.held_back_reason === "throttled"),
          15_000,
        );
        const page = await context.newPage();
        // The page reads the deliveries once; a second's first delivery may be on its way as it reads, so it is
        // read again until one waits.
        await expectEventually(
          async () => {
            await page.goto(`${server.url}/operator`);
            // The page keeps the key it was given: after the first round it opens with the deliveries, no form.
            if (await page.isVisible("#api-key")) {
              await page.fill("#api-key", apiKey);
              await page.click("#key-form button[type=submit]");
            }
            await page.waitForSelector("body[data-loaded=true]");
            return page.locator("[data-testid=delivery-wait]").allInnerTexts();
          },
          (waits) => expect(waits.filter((text) => text.includes("throttled"))).not.toEqual([]),
          { timeoutMs: 20_000 },
        );
      } finally {
        await context.close();
      }
    }, 60_000);

    it("creates a key with the scopes ticked, shows it once, revokes it, and lists both in the audit log", async () => {
      const { organizationId, apiKey } = await server.newOrganization("operator keys");
      const page = await browser.newPage();
      const pageErrors: string[] = [];
      page.on("pageerror", (error) => pageErrors.push(error.message));
      page.on("dialog", (dialog) => void dialog.accept());
      try {
        await page.goto(`${server.url}/operator`);
        await page.fill("#api-key", apiKey);
        await page.click("#key-form button[type=submit]");
        await page.waitForSelector("body[data-loaded=true]");
        await expectEventually(
          () => page.locator("#keys tbody tr").count(),
          (count) => expect(count).toBe(1),
        );
        await page.fill("#key-name", "dashboard");
        for (const box of await page.locator("#key-scopes input").all()) {
          if ((await box.getAttribute("value")) !== "REFERENCES_READ") await box.uncheck();
        }
        await page.click("#key-create button[type=submit]");
        await page.waitForSelector("#new-key:not([hidden])");
        const created = await page.locator("[data-testid=new-key]").innerText();
        const dashboard = { url: server.url, apiKey: created };
        expect((await http(dashboard, "GET", "/v1/references")).status).toBe(200);
        const refused = await http(dashboard, "POST", "/v1/tags", { body: { name: "nope" } });
        expect([refused.status, refused.body.code]).toEqual([403, "FORBIDDEN"]);

        const row = page.locator("#keys tbody tr", { hasText: "dashboard" });
        expect(await row.locator("[data-testid=key-scopes]").innerText()).toBe("references:read");
        expect(await row.locator("[data-testid=key-prefix]").innerText()).toBe(`${created.slice(0, 8)}…`);
        await row.getByRole("button", { name: "Revoke" }).click();
        await expectEventually(
          () => row.locator("[data-testid=key-state]").innerText(),
          (value) => expect(value).toBe("revoked"),
        );
        expect((await http(dashboard, "GET", "/v1/references")).status).toBe(401);

        await page.click("#refresh");
        await expectEventually(
          () => page.locator("#audit [data-testid=audit-action]").allInnerTexts(),
          (actions) => expect(actions.slice(0, 2)).toEqual(["api_key.revoked", "api_key.created"]),
        );
        const actors = await page.locator("#audit [data-testid=audit-actor]").allInnerTexts();
        expect(actors.slice(0, 2)).toEqual([`${apiKey.slice(0, 8)}…`, `${apiKey.slice(0, 8)}…`]);
        expect(await page.locator("#audit").innerText()).not.toContain(created);

        // A key without keys:read and audit:read still sees the endpoints; the two parts say what it lacks.
        const narrow = await server.app.services.organizations.createApiKey(organizationId, {
          name: "webhooks only",
          scopes: new Set(["references:read", "webhooks:read"] as const),
        });
        await page.click("#change-key");
        await page.fill("#api-key", narrow.key);
        await page.click("#key-form button[type=submit]");
        await page.waitForSelector("#keys-forbidden:not([hidden])");
        expect(await page.locator("#keys-forbidden").innerText()).toContain("keys:read");
        await page.waitForSelector("#audit-forbidden:not([hidden])");
        expect(await page.locator("#audit-forbidden").innerText()).toContain("audit:read");
        expect(pageErrors).toEqual([]);
      } finally {
        await page.close();
      }
    }, 60_000);

    it("shows a failing endpoint's failure, and the new successful attempt after the receiver is fixed and Resend clicked", async () => {
      const { apiKey } = await server.newOrganization("operator");
      const caller: Caller = { url: server.url, apiKey };
      const path = `/${kind}/operator`;
      let healthy = false;
      receiver.respond(path, () =>
        healthy ? { status: 200, body: "thanks" } : { status: 500, body: "receiver is down for maintenance" },
      );
      const endpoint = await createEndpoint(caller, { url: receiver.url(path), description: "billing system" });
      await createReference(caller);
      const [delivery] = await eventually(async () => {
        const deliveries = await listDeliveries(caller, endpoint.id);
        return deliveries.length === 1 && deliveries[0].status === "failed" ? deliveries : null;
      }, 15_000);

      const context = await browser.newContext();
      const outside: string[] = [];
      await context.route("**/*", (route) => {
        if (isLocal(route.request().url())) return route.continue();
        outside.push(route.request().url());
        return route.abort();
      });
      const page = await context.newPage();
      const sockets: string[] = [];
      page.on("websocket", (socket) => sockets.push(socket.url()));
      const pageErrors: string[] = [];
      page.on("pageerror", (error) => pageErrors.push(error.message));
      try {
        await page.goto(`${server.url}/operator`);
        await page.fill("#api-key", apiKey);
        await page.click("#key-form button[type=submit]");
        await page.waitForSelector("body[data-loaded=true]");
        await page.waitForSelector("#live[data-state=on]", { timeout: 15_000 });

        const endpointRow = page.locator(`tr[data-endpoint="${endpoint.id}"]`);
        await expectEventually(
          () => endpointRow.locator("[data-testid=endpoint-state]").innerText(),
          (value) => expect(value).toContain("failing"),
        );
        expect(await endpointRow.locator("[data-testid=failing-since]").innerText()).toMatch(/^\d{4}-\d\d-\d\d /);
        const deliveryRow = page.locator(`tr[data-delivery="${delivery.id}"]`);
        expect(await deliveryRow.locator("[data-testid=delivery-status]").innerText()).toBe("failed");
        expect(await deliveryRow.locator("[data-testid=attempt]").count()).toBe(1);
        expect(await deliveryRow.locator("[data-testid=attempt-result]").innerText()).toContain("500");
        expect(await deliveryRow.innerText()).toContain("receiver is down for maintenance");

        // The outcome filter: "succeeded" hides the failed delivery, "failed" shows it.
        await page.selectOption("#filter-status", "SUCCEEDED");
        await expectEventually(
          () => page.locator(`tr[data-delivery="${delivery.id}"]`).count(),
          (value) => expect(value).toBe(0),
        );
        await page.selectOption("#filter-status", "FAILED");
        await expectEventually(
          () => page.locator(`tr[data-delivery="${delivery.id}"]`).count(),
          (value) => expect(value).toBe(1),
        );
        await page.selectOption("#filter-status", "");

        healthy = true;
        await deliveryRow.getByRole("button", { name: "Resend" }).click();
        // No reload, no polling: the subscription's message brings the second attempt.
        await expectEventually(
          () => deliveryRow.locator("[data-testid=delivery-status]").innerText(),
          (value) => expect(value).toBe("succeeded"),
          { timeoutMs: 15_000 },
        );
        expect(await deliveryRow.locator("[data-testid=attempt]").count()).toBe(2);
        expect(await deliveryRow.locator("[data-testid=attempt-result]").nth(1).innerText()).toContain("200");
        await expectEventually(
          () => endpointRow.locator("[data-testid=endpoint-state]").innerText(),
          (value) => expect(value).toContain("healthy"),
          { timeoutMs: 15_000 },
        );
        expect(receiver.on(path).map((hook) => hook.webhookId)).toEqual([delivery.id, delivery.id]);

        // Rotating shows the new secret once, and it signs from then on.
        page.once("dialog", (dialog) => void dialog.accept());
        await endpointRow.getByRole("button", { name: "Rotate secret" }).click();
        await page.waitForSelector("#secret:not([hidden])");
        const secret = await page.locator("#secret-value").innerText();
        expect(secret).toMatch(/^whsec_/);
        receiver.verifyWith(path, secret);
        await endpointRow.getByRole("button", { name: "Send test" }).click();
        await receiver.waitFor(() => receiver.on(path).some((hook) => hook.verifiedBy.includes(secret)), 15_000);
        await expectEventually(
          () => page.locator("tr[data-delivery]").count(),
          (value) => expect(value).toBe(2),
          { timeoutMs: 15_000 },
        );

        await endpointRow.getByRole("button", { name: "Disable" }).click();
        await expectEventually(
          () => endpointRow.locator("[data-testid=endpoint-state]").innerText(),
          (value) => expect(value).toContain("disabled"),
          { timeoutMs: 15_000 },
        );
        expect((await http(caller, "GET", `/v1/webhooks/${endpoint.id}`)).body.enabled).toBe(false);
        if (SCREENSHOT) {
          await endpointRow.getByRole("button", { name: "Enable" }).click();
          await expectEventually(
            () => endpointRow.locator("[data-testid=endpoint-state]").innerText(),
            (value) => expect(value).toContain("healthy"),
          );
          await page.screenshot({ path: SCREENSHOT.replace(".png", `-${kind}.png`), fullPage: true });
        }
        expect(pageErrors).toEqual([]);
        expect(outside).toEqual([]);
        expect(sockets.length).toBeGreaterThan(0);
        expect(sockets.filter((url) => !url.startsWith("ws://127.0.0.1:"))).toEqual([]);
      } finally {
        await context.close();
      }
    }, 90_000);
  });
});
