import type { TestServer } from "./test-server.ts";

export interface HttpResult<T = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

/** A real HTTP request to the test server, authenticated with its key unless `apiKey: null`. */
export async function http<T = any>(
  server: Pick<TestServer, "url" | "apiKey">,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string; apiKey?: string | null; headers?: Record<string, string> } = {},
): Promise<HttpResult<T>> {
  const headers: Record<string, string> = { ...options.headers };
  const apiKey = options.apiKey === undefined ? server.apiKey : options.apiKey;
  if (apiKey !== null) headers["x-api-key"] = apiKey;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const response = await fetch(`${server.url}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text === "" ? undefined : JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, headers: response.headers, body: parsed as T };
}

/**
 * Asserts a response's status; a failure shows the body, which says why (a problem's `code` and `errors`).
 * Jest's `expect` takes no message argument, hence this check of its own.
 */
export function expectStatus(result: HttpResult, status: number): void {
  if (result.status !== status) {
    throw new Error(`expected HTTP ${status}, got ${result.status}: ${JSON.stringify(result.body)}`);
  }
}
