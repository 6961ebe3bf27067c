import { serverAudits } from "graphql-http";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The GraphQL-over-HTTP conformance audits shipped with graphql-http, against the real server. Every MUST
 * audit has to pass; SHOULD and MAY audits are recommendations, reported (not failed) when they do not.
 */
describe.each(DATABASE_KINDS)("GraphQL over HTTP conformance on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  // Every operation needs an API key; the audits send their own requests, so the key is added here.
  const audits = serverAudits({
    url: () => `${server.url}/graphql`,
    fetchFn: (input: string | URL | Request, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set("x-api-key", server.apiKey);
      return fetch(input, { ...init, headers });
    },
  });

  for (const audit of audits) {
    const required = audit.name.startsWith("MUST ");
    it(`${required ? "passes" : "reports"} ${audit.id}: ${audit.name}`, async () => {
      const result = await audit.fn();
      if (result.status === "ok") return;
      const detail = `${audit.id} ${audit.name}: ${result.reason}`;
      if (required) throw new Error(detail);
      console.warn(`[graphql-http audit, ${kind}] not followed (${result.status}): ${detail}`);
    });
  }

  it("includes MUST audits", () => {
    expect(audits.filter((audit) => audit.name.startsWith("MUST ")).length).toBeGreaterThan(5);
  });
});
