import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { containerNumber } from "./support/container-numbers.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * A query over HTTP whose document Apollo has parsed and validated before runs the pipeline's stages without
 * Apollo's request pipeline (src/graphql/direct-queries.ts). Seen from outside, nothing may tell the two apart:
 * the same status, headers and bytes (the budget's figures apart, which move with every request), the same
 * charge; everything that is not the common case is still Apollo's. /metrics (open outside production) says which
 * engine answered: `reftrail_graphql_http_operations_total{engine}`.
 */

const REFERENCE_QUERY = `query DirectReference($id: ID!) {
  reference(id: $id) { id tags { name } events(first: 5) { edges { cursor node { type } } pageInfo { hasNextPage } } }
}`;
const MISSING_ID = "01890000-0000-7000-8000-000000000000";

interface Answer {
  readonly status: number;
  readonly contentType: string | null;
  readonly cacheControl: string | null;
  readonly text: string;
}

/** The answer's text with the budget's figures, which every request moves, blanked. */
const withoutBudgetFigures = (text: string) => text.replace(/"currentlyAvailable":[\d.]+/g, '"currentlyAvailable":0');

describe.each(DATABASE_KINDS)("queries over HTTP without Apollo's request pipeline on %s", (kind) => {
  let server: TestServer;
  let referenceId: string;

  beforeAll(async () => {
    // A budget that restores nothing while the test runs: each answer's `currentlyAvailable` is what was charged.
    server = await startTestServer(kind, {
      env: { WEBHOOK_WORKER: "off", COST_BUDGET_MAXIMUM: "1000000", COST_BUDGET_RESTORE_RATE: "0.0001" },
    });
    const created = await http(server, "POST", "/v1/references", {
      body: {
        container_id: containerNumber("DIRU", 7),
        carrier_code: "MAEU",
        tags: [{ name: "direct" }, { name: "dïrect-☃-😀" }],
      },
    });
    expect(created.status).toBe(201);
    referenceId = (created.body as { reference: { id: string } }).reference.id;
  });
  afterAll(async () => {
    await server?.close();
  });

  async function engines(): Promise<Record<string, number>> {
    const text = String((await http(server, "GET", "/metrics", { apiKey: null })).body);
    const counts: Record<string, number> = { direct: 0, apollo: 0 };
    for (const match of text.matchAll(/^reftrail_graphql_http_operations_total\{engine="(\w+)"\} (\d+)$/gm))
      counts[match[1]!] = Number(match[2]);
    return counts;
  }

  /** `request`'s answer, and which engines answered it. */
  async function answered(request: () => Promise<Answer>): Promise<Answer & { engines: Record<string, number> }> {
    const before = await engines();
    const answer = await request();
    const after = await engines();
    return {
      ...answer,
      engines: { direct: after.direct! - before.direct!, apollo: after.apollo! - before.apollo! },
    };
  }

  async function send(
    method: "GET" | "POST",
    parameters: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const url = new URL(`${server.url}/graphql`);
    if (method === "GET")
      for (const [name, value] of Object.entries(parameters))
        url.searchParams.set(name, typeof value === "string" ? value : JSON.stringify(value));
    const response = await fetch(url, {
      method,
      headers: {
        "x-api-key": server.apiKey,
        // Computed afresh: the read cache would answer a repeated query before either engine.
        "cache-control": "no-cache",
        ...(method === "POST" && { "content-type": "application/json" }),
        ...headers,
      },
      ...(method === "POST" && { body: JSON.stringify(parameters) }),
    });
    return {
      status: response.status,
      contentType: response.headers.get("content-type"),
      cacheControl: response.headers.get("cache-control"),
      text: await response.text(),
    };
  }

  const post = (parameters: Record<string, unknown>, headers?: Record<string, string>) => () =>
    send("POST", parameters, headers);

  it("answers a document's second request itself, with Apollo's status, headers and bytes", async () => {
    const request = post({ query: REFERENCE_QUERY, variables: { id: referenceId } });
    const first = await answered(request);
    const second = await answered(request);
    expect(first.engines).toEqual({ direct: 0, apollo: 1 });
    expect(second.engines).toEqual({ direct: 1, apollo: 0 });
    expect(second.status).toBe(200);
    expect(second.contentType).toBe(first.contentType);
    expect(second.cacheControl).toBe("no-store");
    expect(first.cacheControl).toBe("no-store");
    expect(second.text.endsWith("}\n")).toBe(true);
    expect(withoutBudgetFigures(second.text)).toBe(withoutBudgetFigures(first.text));
    const body = JSON.parse(second.text);
    // A name beyond ASCII (two, three and four bytes of UTF-8): the bytes sent are the text's, whole.
    expect(body.data.reference.id).toBe(referenceId);
    expect(body.data.reference.tags).toEqual(expect.arrayContaining([{ name: "direct" }, { name: "dïrect-☃-😀" }]));
    expect(Object.keys(body)).toEqual(["data", "extensions"]);
    // Charged as Apollo charges: the estimate, settled to the actual cost.
    const [firstCost, secondCost] = [JSON.parse(first.text).extensions.cost, body.extensions.cost];
    expect(secondCost.requestedQueryCost).toBe(firstCost.requestedQueryCost);
    expect(secondCost.actualQueryCost).toBe(firstCost.actualQueryCost);
    expect(firstCost.throttleStatus.currentlyAvailable - secondCost.throttleStatus.currentlyAvailable).toBe(
      secondCost.actualQueryCost,
    );
  });

  it("answers in the media type Apollo chose for the same Accept header", async () => {
    const accept = "application/graphql-response+json";
    const request = post(
      { query: `query AcceptsGraphqlResponse { tags(first: 1) { edges { node { name } } } }` },
      { accept },
    );
    const first = await answered(request);
    const second = await answered(request);
    expect(first.engines).toEqual({ direct: 0, apollo: 1 });
    expect(second.engines).toEqual({ direct: 1, apollo: 0 });
    expect(first.contentType).toBe("application/graphql-response+json; charset=utf-8");
    expect(second.contentType).toBe(first.contentType);
    expect(withoutBudgetFigures(second.text)).toBe(withoutBudgetFigures(first.text));
  });

  it("hands a result with errors to Apollo, charging it once", async () => {
    const request = post({ query: REFERENCE_QUERY, variables: { id: MISSING_ID } });
    const first = await answered(request);
    const second = await answered(request);
    expect(first.engines).toEqual({ direct: 0, apollo: 1 });
    expect(second.engines).toEqual({ direct: 0, apollo: 1 });
    expect(second.status).toBe(200);
    expect(withoutBudgetFigures(second.text)).toBe(withoutBudgetFigures(first.text));
    const [firstBody, secondBody] = [JSON.parse(first.text), JSON.parse(second.text)];
    expect(secondBody.errors[0].extensions.code).toBe("NOT_FOUND");
    // The direct run's charge was given back: the budget moved by one run's cost only.
    expect(
      firstBody.extensions.cost.throttleStatus.currentlyAvailable -
        secondBody.extensions.cost.throttleStatus.currentlyAvailable,
    ).toBe(secondBody.extensions.cost.actualQueryCost);
  });

  it("leaves GET, mutations and refusals to Apollo", async () => {
    const get = () => send("GET", { query: `query ByGet { tags(first: 1) { edges { node { name } } } }` });
    await answered(get);
    expect((await answered(get)).engines).toEqual({ direct: 0, apollo: 1 });

    const createTag = (name: string) =>
      post({
        query: `mutation Tag($name: String!) { createTag(input: { name: $name }) { tag { name } } }`,
        variables: { name },
      });
    expect((await answered(createTag("direct-one"))).engines).toEqual({ direct: 0, apollo: 1 });
    expect((await answered(createTag("direct-two"))).engines).toEqual({ direct: 0, apollo: 1 });

    // Variables that do not coerce: Apollo's refusal, with its status.
    const badVariables = post({ query: REFERENCE_QUERY, variables: { id: 42.5 } });
    const refused = await answered(badVariables);
    expect(refused.engines).toEqual({ direct: 0, apollo: 1 });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text).errors[0].extensions.code).toBe("BAD_USER_INPUT");
  });
});
