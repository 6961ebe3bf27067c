import type { Outcome, Page } from "./drivers.ts";
import { http } from "./http.ts";
import type { TestServer } from "./test-server.ts";

/*
 * The webhook operations of the scenario suite through REST or GraphQL, in one neutral shape:
 * camelCase fields, event types and statuses in REST's snake_case spelling.
 */

export interface EndpointView {
  readonly id: string;
  readonly url: string;
  readonly eventTypes: readonly string[] | null;
  readonly description: string | null;
  readonly enabled: boolean;
  readonly previousSecretExpiresAt: string | null;
}

export interface DeliveryView {
  readonly id: string;
  readonly endpointId: string;
  readonly eventType: string;
  readonly status: string;
  readonly attemptCount: number;
  readonly body: Record<string, any>;
}

export interface EndpointInput {
  readonly url?: string;
  readonly eventTypes?: readonly string[] | null;
  readonly description?: string | null;
  readonly enabled?: boolean;
}

export interface WebhookDriver {
  readonly surface: "rest" | "graphql";
  create(input: EndpointInput): Promise<Outcome<{ endpoint: EndpointView; secret: string }>>;
  get(id: string): Promise<Outcome<EndpointView>>;
  list(options?: { limit?: number; cursor?: string }): Promise<Outcome<Page<EndpointView>>>;
  update(id: string, changes: EndpointInput): Promise<Outcome<EndpointView>>;
  remove(id: string): Promise<Outcome<true>>;
  rotateSecret(id: string): Promise<Outcome<{ endpoint: EndpointView; secret: string }>>;
  sendTest(id: string): Promise<Outcome<DeliveryView>>;
  listDeliveries(id: string, options?: { limit?: number; cursor?: string }): Promise<Outcome<Page<DeliveryView>>>;
  resend(endpointId: string, deliveryId: string): Promise<Outcome<DeliveryView>>;
}

function restFailure(status: number, body: any): Outcome<never> {
  const fields = ((body?.errors ?? []) as { pointer: string }[]).map((error) =>
    error.pointer
      .replace(/^\//, "")
      .split("/")
      .map((segment) => segment.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()))
      .join("."),
  );
  return { ok: false, code: body?.code ?? `HTTP_${status}`, fields, status, body };
}

const restEndpoint = (body: any): EndpointView => ({
  id: body.id,
  url: body.url,
  eventTypes: body.event_types,
  description: body.description,
  enabled: body.enabled,
  previousSecretExpiresAt: body.previous_secret_expires_at,
});

const restDelivery = (body: any): DeliveryView => ({
  id: body.id,
  endpointId: body.endpoint_id,
  eventType: body.event_type,
  status: body.status,
  attemptCount: body.attempt_count,
  body: body.body,
});

const restInput = (input: EndpointInput) => ({
  url: input.url,
  event_types: input.eventTypes,
  description: input.description,
  enabled: input.enabled,
});

function pageQuery(options: { limit?: number; cursor?: string } = {}): string {
  const search = new URLSearchParams();
  if (options.limit !== undefined) search.set("limit", String(options.limit));
  if (options.cursor) search.set("cursor", options.cursor);
  return `${search}`;
}

export function restWebhookDriver(server: Pick<TestServer, "url" | "apiKey">): WebhookDriver {
  const call = async <T>(
    method: string,
    path: string,
    ok: number,
    map: (body: any) => T,
    body?: unknown,
  ): Promise<Outcome<T>> => {
    const result = await http(server, method, path, { body });
    return result.status === ok ? { ok: true, value: map(result.body) } : restFailure(result.status, result.body);
  };
  return {
    surface: "rest",
    create: (input) =>
      call(
        "POST",
        "/v1/webhooks",
        201,
        (body) => ({ endpoint: restEndpoint(body), secret: body.secret }),
        restInput(input),
      ),
    get: (id) => call("GET", `/v1/webhooks/${id}`, 200, restEndpoint),
    list: (options) =>
      call("GET", `/v1/webhooks?${pageQuery(options)}`, 200, (body) => ({
        items: body.data.map(restEndpoint),
        nextCursor: body.next_cursor,
      })),
    update: (id, changes) => call("PATCH", `/v1/webhooks/${id}`, 200, restEndpoint, restInput(changes)),
    remove: (id) => call("DELETE", `/v1/webhooks/${id}`, 204, () => true as const),
    rotateSecret: (id) =>
      call("POST", `/v1/webhooks/${id}/rotate-secret`, 200, (body) => ({
        endpoint: restEndpoint(body),
        secret: body.secret,
      })),
    sendTest: (id) => call("POST", `/v1/webhooks/${id}/test`, 202, restDelivery),
    listDeliveries: (id, options) =>
      call("GET", `/v1/webhooks/${id}/deliveries?${pageQuery(options)}`, 200, (body) => ({
        items: body.data.map(restDelivery),
        nextCursor: body.next_cursor,
      })),
    resend: (endpointId, deliveryId) =>
      call("POST", `/v1/webhooks/${endpointId}/deliveries/${deliveryId}/resend`, 202, restDelivery),
  };
}

const ENDPOINT_FIELDS = "id url eventTypes description enabled previousSecretExpiresAt";
const DELIVERY_FIELDS = "id endpointId eventType status attemptCount body";

const lower = (value: string) => value.toLowerCase();

const graphqlEndpoint = (node: any): EndpointView => ({
  ...node,
  eventTypes: node.eventTypes?.map(lower) ?? null,
});

const graphqlDelivery = (node: any): DeliveryView => ({
  ...node,
  status: lower(node.status),
  eventType: lower(node.eventType),
});

function graphqlInput(input: EndpointInput): Record<string, unknown> {
  return {
    ...input,
    ...(input.eventTypes !== undefined && { eventTypes: input.eventTypes?.map((type) => type.toUpperCase()) ?? null }),
  };
}

function graphqlFailure(body: { errors?: any[] }): Outcome<never> {
  const error = body.errors?.[0];
  const fields = (body.errors ?? []).flatMap((e) => {
    const issues = (e.extensions?.issues ?? []) as { field?: string }[];
    const field = typeof e.extensions?.field === "string" ? [e.extensions.field as string] : [];
    return [...field, ...issues.flatMap((issue) => (issue.field ? [issue.field] : []))].map((path) =>
      path.replace(/^input\./, ""),
    );
  });
  return { ok: false, code: error?.extensions?.code ?? "UNKNOWN", fields: [...new Set(fields)], body };
}

export function graphqlWebhookDriver(server: Pick<TestServer, "url" | "apiKey">): WebhookDriver {
  const run = async <T>(
    query: string,
    variables: Record<string, unknown>,
    pick: (data: any) => T | null,
  ): Promise<Outcome<T>> => {
    const response = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": server.apiKey },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: any; errors?: any[] };
    if (body.errors?.length) return graphqlFailure(body);
    const value = pick(body.data);
    if (value === null) return { ok: false, code: "NOT_FOUND", fields: [], body };
    return { ok: true, value };
  };
  const mutation = (name: string, input: string, selection: string) =>
    `mutation($input: ${input}!) { ${name}(input: $input) { ${selection} } }`;
  const page = <T>(connection: any, map: (node: any) => T): Page<T> => ({
    items: connection.edges.map((edge: any) => map(edge.node)),
    nextCursor: connection.pageInfo.hasNextPage ? connection.pageInfo.endCursor : null,
  });
  return {
    surface: "graphql",
    create: (input) =>
      run(
        mutation(
          "createWebhookEndpoint",
          "CreateWebhookEndpointInput",
          `secret webhookEndpoint { ${ENDPOINT_FIELDS} }`,
        ),
        { input: graphqlInput(input) },
        (d) => ({
          endpoint: graphqlEndpoint(d.createWebhookEndpoint.webhookEndpoint),
          secret: d.createWebhookEndpoint.secret,
        }),
      ),
    get: (id) =>
      run(`query($id: ID!) { webhookEndpoint(id: $id) { ${ENDPOINT_FIELDS} } }`, { id }, (d) =>
        d.webhookEndpoint ? graphqlEndpoint(d.webhookEndpoint) : null,
      ),
    list: (options = {}) =>
      run(
        `query($first: Int, $after: String) {
          webhookEndpoints(first: $first, after: $after) { edges { node { ${ENDPOINT_FIELDS} } } pageInfo { hasNextPage endCursor } }
        }`,
        { first: options.limit, after: options.cursor },
        (d) => page(d.webhookEndpoints, graphqlEndpoint),
      ),
    update: (id, changes) =>
      run(
        mutation("updateWebhookEndpoint", "UpdateWebhookEndpointInput", `webhookEndpoint { ${ENDPOINT_FIELDS} }`),
        { input: { id, ...graphqlInput(changes) } },
        (d) => graphqlEndpoint(d.updateWebhookEndpoint.webhookEndpoint),
      ),
    remove: (id) =>
      run(
        mutation("deleteWebhookEndpoint", "DeleteWebhookEndpointInput", "deletedWebhookEndpointId"),
        {
          input: { id },
        },
        () => true as const,
      ),
    rotateSecret: (id) =>
      run(
        mutation(
          "rotateWebhookEndpointSecret",
          "RotateWebhookEndpointSecretInput",
          `secret webhookEndpoint { ${ENDPOINT_FIELDS} }`,
        ),
        { input: { id } },
        (d) => ({
          endpoint: graphqlEndpoint(d.rotateWebhookEndpointSecret.webhookEndpoint),
          secret: d.rotateWebhookEndpointSecret.secret,
        }),
      ),
    sendTest: (endpointId) =>
      run(
        mutation("sendTestWebhook", "SendTestWebhookInput", `delivery { ${DELIVERY_FIELDS} }`),
        { input: { endpointId } },
        (d) => graphqlDelivery(d.sendTestWebhook.delivery),
      ),
    listDeliveries: (id, options = {}) =>
      run(
        `query($id: ID!, $first: Int, $after: String) {
          webhookEndpoint(id: $id) {
            deliveries(first: $first, after: $after) { edges { node { ${DELIVERY_FIELDS} } } pageInfo { hasNextPage endCursor } }
          }
        }`,
        { id, first: options.limit, after: options.cursor },
        (d) => (d.webhookEndpoint ? page(d.webhookEndpoint.deliveries, graphqlDelivery) : null),
      ),
    resend: (_endpointId, deliveryId) =>
      run(
        mutation("resendWebhookDelivery", "ResendWebhookDeliveryInput", `delivery { ${DELIVERY_FIELDS} }`),
        { input: { deliveryId } },
        (d) => graphqlDelivery(d.resendWebhookDelivery.delivery),
      ),
  };
}
