import type { TestServer } from "./test-server.ts";

/** A GraphQL error as the server sends it. */
export interface GraphqlErrorBody {
  readonly message: string;
  readonly path?: readonly (string | number)[];
  readonly extensions?: Record<string, any>;
}

export interface GraphqlResponse<Data = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: {
    readonly data?: Data | null;
    readonly errors?: readonly GraphqlErrorBody[];
    readonly extensions?: Record<string, any>;
  };
}

export interface GqlOptions {
  /** The key to send; the server's own key by default, `null` to send none. */
  readonly apiKey?: string | null;
  readonly headers?: Record<string, string>;
}

/** POSTs one GraphQL operation to the test server, authenticated with its key unless told otherwise. */
export async function gql<Data = any>(
  server: Pick<TestServer, "url" | "apiKey">,
  query: string,
  variables: Record<string, unknown> = {},
  options: GqlOptions = {},
): Promise<GraphqlResponse<Data>> {
  const apiKey = options.apiKey === undefined ? server.apiKey : options.apiKey;
  const response = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/graphql-response+json, application/json",
      ...(apiKey !== null && { "x-api-key": apiKey }),
      ...options.headers,
    },
    body: JSON.stringify({ query, variables }),
  });
  const text = await response.text();
  let body: GraphqlResponse<Data>["body"];
  try {
    body = JSON.parse(text) as GraphqlResponse<Data>["body"];
  } catch {
    throw new Error(`GraphQL answered ${response.status} with a body that is not JSON: ${text.slice(0, 500)}`);
  }
  return { status: response.status, headers: response.headers, body };
}

/** Like {@link gql}, but fails the test when the operation returned errors; returns `data`. */
export async function gqlData<Data = any>(
  server: Pick<TestServer, "url" | "apiKey">,
  query: string,
  variables: Record<string, unknown> = {},
  options: GqlOptions = {},
): Promise<Data> {
  const { status, body } = await gql<Data>(server, query, variables, options);
  if (body.errors?.length || !body.data) {
    throw new Error(`GraphQL operation failed (HTTP ${status}): ${JSON.stringify(body.errors ?? body)}`);
  }
  return body.data;
}
