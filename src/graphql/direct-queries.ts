import type { FastifyRequest } from "fastify";
import type { ExecutionResult } from "graphql";
import { LRUCache } from "lru-cache";
import { Counter, type Registry } from "prom-client";
import type { GraphqlPipeline } from "../pipeline/graphql-pipeline.ts";
import type { OperationRequest } from "../pipeline/operation-request.ts";
import type { GraphqlOperationSpans } from "../tracing/graphql-spans.ts";
import type { CompiledExecutor } from "./compiled-execution.ts";
import type { GraphqlContext } from "./context.ts";
import { isJsonObject } from "../domain/shared/json-input.ts";
import { utf8Bytes } from "../domain/shared/utf8.ts";

/*
 * Queries over HTTP that run without Apollo Server's request pipeline (docs/architecture.md, "Apollo over HTTP";
 * decision 0113).
 *
 * Apollo's executeHTTPGraphQLRequest redoes, on every request, work the pipeline already does once per document: it
 * hashes the text for its document store, copies the headers into its HeaderMap, negotiates the media type, and
 * calls every plugin hook. Profiled on the data path's GraphQL reference (SQLite), that was about a sixth of the
 * main thread's time per request. So a query sent as a JSON POST runs the pipeline's stages itself, in the same
 * order (prepare, charge, admit, execute with the compiled executor, publish), and its answer is written as Apollo
 * writes it: the same bytes (`{"data":…,"extensions":{"cost":…}}` and a newline), status and headers.
 *
 * Whatever is not that common case goes to Apollo, unchanged, so that Apollo alone decides every refusal and every
 * error's shape and status: GET, a batch, a body Apollo would refuse, a document's first request (Apollo parses,
 * validates and refuses it if it must; only a document that passed is prepared), a mutation or subscription, a
 * refused charge, an Accept header Apollo has not answered yet, and a result with errors, whose charge is given
 * back before Apollo runs the query again from its start (a query changes nothing). The media type of an Accept
 * header is the one Apollo chose for it (learnt from its answers, bounded): nothing here negotiates.
 */

/** How many distinct Accept headers' media types are remembered (clients send a handful). */
const MAX_ACCEPT_HEADERS = 64;

/** The media type Apollo answers a request without an Accept header with. */
const DEFAULT_MEDIA_TYPE = "application/json; charset=utf-8";

export interface DirectAnswer {
  readonly contentType: string;
  /** The answer's text, for the read cache. */
  readonly body: string;
  /**
   * The same answer as UTF-8, what is sent: the text encoded once, here, rather than measured for its length and
   * then encoded again by Node's socket write, and held outside the JavaScript heap, where the young generation's
   * collections copy what is still alive (an answer of 20 events is about 9 KB).
   */
  readonly bytes: Buffer;
}

export class DirectQueries {
  private readonly operations: Counter<"engine"> | null;
  /** The media type of Apollo's successful answers, by the Accept header as sent. */
  private readonly mediaTypes = new LRUCache<string, string>({ max: MAX_ACCEPT_HEADERS });

  constructor(
    private readonly pipeline: GraphqlPipeline,
    private readonly executor: CompiledExecutor,
    private readonly contextOf: (request: OperationRequest, httpRequest: FastifyRequest) => GraphqlContext,
    private readonly spans: GraphqlOperationSpans<GraphqlContext> | null,
    registry?: Registry,
  ) {
    this.operations = registry
      ? new Counter({
          name: "reftrail_graphql_http_operations_total",
          help: "GraphQL operations over HTTP, by what ran them (direct: a query without Apollo's request pipeline)",
          labelNames: ["engine"] as const,
          registers: [registry],
        })
      : null;
  }

  /**
   * The answer of an authenticated request whose document is resolved (stages 1 to 3 have run), or null: Apollo
   * answers it. A null leaves no charge taken.
   */
  async answer(httpRequest: FastifyRequest, request: OperationRequest): Promise<DirectAnswer | null> {
    if (httpRequest.method !== "POST" || request.failure || !request.caller) return null;
    const contentType = this.mediaTypeOf(httpRequest.headers.accept);
    if (contentType === undefined) return null;
    const { query, operationName, variables, extensions } = request.source;
    if (typeof query !== "string" || query === "" || extensions !== undefined) return null;
    if (operationName !== undefined && operationName !== null && typeof operationName !== "string") return null;
    if (variables !== undefined && variables !== null && !isJsonObject(variables)) return null;

    // Only a query of a document Apollo has parsed and validated before: no text is parsed twice.
    if (this.pipeline.documents.peek(query, operationName ?? null)?.kind !== "query") return null;
    if (this.pipeline.prepare(request) !== null || !request.prepared) return null;
    if ((await this.pipeline.charge(request)) !== null) return null;
    await this.pipeline.admit(request);
    const prepared = request.prepared;
    const contextValue = this.contextOf(request, httpRequest);
    const run = () => this.executor.runPrepared(prepared, operationName ?? null, variables ?? {}, contextValue);
    const result: ExecutionResult = this.spans
      ? // Named as Apollo names it: by the operation the document runs, whether or not the request named it.
        await this.spans.around(
          contextValue,
          prepared.operation.name?.value ?? null,
          run,
          (done) => done.errors?.[0]?.extensions.code,
        )
      : await run();
    if (result.errors !== undefined && result.errors.length > 0) {
      this.pipeline.giveBack(request);
      return null;
    }
    const cost = await this.pipeline.publish(request, result, false);
    // Apollo's order of a result's fields, and its newline.
    const json = JSON.stringify({ data: result.data, extensions: cost ? { cost } : undefined });
    const bytes = utf8Bytes(json, "\n");
    this.operations?.inc({ engine: "direct" });
    return { contentType, body: `${json}\n`, bytes };
  }

  /** Counts an operation Apollo answered, and remembers the media type it chose for a successful one. */
  learn(accept: string | undefined, status: number, contentType: unknown): void {
    this.operations?.inc({ engine: "apollo" });
    if (accept === undefined || status !== 200 || typeof contentType !== "string") return;
    if (this.mediaTypes.get(accept) !== contentType) this.mediaTypes.set(accept, contentType);
  }

  private mediaTypeOf(accept: string | undefined): string | undefined {
    return accept === undefined ? DEFAULT_MEDIA_TYPE : this.mediaTypes.get(accept);
  }
}
