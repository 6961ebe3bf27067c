import type { ServerResponse } from "node:http";
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { GraphQLError, type GraphQLFormattedError, type GraphQLSchema } from "graphql";
import type { Tracer } from "@opentelemetry/api";
import { createHandler, type ExecutionResult, type Response } from "graphql-sse";
import { traceSubscriptionMessage, type MessageOperation } from "../tracing/subscription-spans.ts";
import {
  AUTHENTICATION_CHALLENGE,
  REFUSAL_MESSAGES,
  authenticateHeaders,
  presentedApiKey,
} from "../pipeline/access/authentication.ts";
import type { Config } from "../config.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { Services } from "../domain/services.ts";
import type { DeliveryActivityService } from "../domain/webhooks/delivery-activity.ts";
import {
  createGraphqlErrorMasking,
  SERVICE_UNAVAILABLE,
  SERVICE_UNAVAILABLE_MESSAGE,
} from "../pipeline/errors/error-masking.ts";
import type { LiveSubscriptions } from "../live/live-subscriptions.ts";
import type { GraphqlPipeline } from "../pipeline/graphql-pipeline.ts";
import { newOperationRequest } from "../pipeline/operation-request.ts";
import { DocumentResolver } from "../pipeline/trusted-documents/document-resolution.ts";
import { LiveDocuments } from "../pipeline/trusted-documents/live-documents.ts";
import { createLoaders } from "./loaders.ts";
import { isAsyncIterator, pacedBy, writeResponse } from "./sse-stream.ts";
import type { SubscriptionContext } from "./resolvers/subscription.resolvers.ts";

/** Seconds a client refused for its organization's stream limit is asked to wait (`Retry-After`). */
const STREAM_LIMIT_RETRY_AFTER_SECONDS = 5;

/*
 * Subscriptions over Server-Sent Events (the graphql-sse protocol, "distinct connections mode": one HTTP request
 * per operation, its response the operation's event stream) at SSE_ENDPOINT. The same subscriptions as over
 * graphql-ws (subscription-server.ts), with the same checks by the same code:
 *
 * - authentication: the key in a header (X-API-Key or Authorization: Bearer), as for every HTTP request; a
 *   missing, unknown or revoked key is a 401 before any stream opens, and a key revoked while streaming ends the
 *   stream (checked every SUBSCRIPTION_AUTH_RECHECK_INTERVAL, as graphql-ws's 4401);
 * - the document: parsed and validated once, with the same limits (src/pipeline/documents/prepared-documents.ts); a refused one is a
 *   400 with its GraphQL errors, coded as over graphql-ws. Only subscriptions run here: queries and mutations
 *   belong to /graphql, where the read cache, read admission and idempotency apply;
 * - errors: the HTTP path's masking (src/pipeline/errors/error-masking.ts);
 * - bounds: SUBSCRIPTION_MAX_STREAMS_PER_ORGANIZATION streams at once per organization and instance (graphql-ws
 *   bounds the operations of one connection; here every stream is a connection of its own), and a slow reader
 *   is paced like a graphql-ws client: the next event is taken from the subscription only once the last one has
 *   left for the socket, so a reader that falls behind leaves its events in the subscription's bounded queue,
 *   which then falls back to reading the log (live-subscriptions.ts).
 *
 * At shutdown every stream ends (preClose), like graphql-ws's 1001: the client resumes with its last cursor.
 */

/** Where subscriptions are served over Server-Sent Events. */
export const SSE_ENDPOINT = "/graphql/stream";

export interface SseDependencies {
  readonly schema: GraphQLSchema;
  readonly services: Services;
  readonly config: Config;
  readonly subscriptions: LiveSubscriptions;
  readonly deliveryActivity?: DeliveryActivityService;
  readonly isServiceUnavailable: (error: unknown) => boolean;
  /** The request pipeline: the document prepared once, the subscription charged when it starts. */
  readonly pipeline: GraphqlPipeline;
  /** When tracing is on: a span per message sent (src/tracing/subscription-spans.ts). */
  readonly tracer?: Tracer;
}

/** One open stream: whose it is, the key it presented (checked again), and how to end it. */
interface OpenStream {
  readonly caller: Caller;
  readonly key: string;
  readonly response: ServerResponse;
  readonly log: FastifyBaseLogger;
}

/** What graphql-sse hands its hooks about a request: ours carries the authenticated stream. */
interface StreamRequestContext {
  readonly stream: OpenStream;
}

type SseContext = SubscriptionContext & Record<PropertyKey, unknown>;

export async function registerSseSubscriptions(app: FastifyInstance, deps: SseDependencies): Promise<void> {
  const { schema, services, config, subscriptions } = deps;
  const log = app.log.child({ component: "sse-subscriptions" });
  const masking = createGraphqlErrorMasking(deps.isServiceUnavailable);
  const { pipeline } = deps;
  const streams = new Set<OpenStream>();
  const perOrganization = new Map<string, number>();
  let closing = false;
  /** With tracing on: each operation's document, whose name its messages' spans carry. */
  const tracedOperations = new WeakMap<SseContext, MessageOperation>();

  const format = (errors: readonly GraphQLError[]): GraphQLFormattedError[] =>
    errors.map((error) => masking.format(error.toJSON(), error));

  const handler = createHandler<FastifyRequest, StreamRequestContext, SseContext>({
    // Distinct connections mode only: no stream is reserved for later operations.
    authenticate: () => null,
    // The document is validated once, in onSubscribe, with every rule graphql-ws applies.
    validate: () => [],
    onSubscribe: async (request, params) => {
      const { stream } = request.context;
      // The pipeline's stages 4 and 6 (src/pipeline/graphql-pipeline.ts); 1 and 2 ran before the stream opened.
      const operation = newOperationRequest({
        transport: "sse",
        log: stream.log,
        credentials: {},
        caller: stream.caller,
        source: { ...params, query: params.query ?? "" },
      });
      const refusals = pipeline.prepare(operation);
      const prepared = operation.prepared;
      if (refusals || !prepared) {
        const errors = refusals ?? [];
        masking.logUnexpected(stream.log, errors, params.operationName);
        return errorResponse(400, format(errors));
      }
      if (prepared.kind !== "subscription") {
        const error = new GraphQLError(`Only subscriptions are served here; send a ${prepared.kind} to /graphql`, {
          extensions: { code: "BAD_REQUEST" },
        });
        return errorResponse(400, format([error]));
      }
      const refused = await pipeline.charge(operation);
      if (refused)
        return errorResponse(refused.status, format([refused.error]), {
          "retry-after": String(refused.retryAfterSeconds),
        });
      const contextValue: SseContext = {
        request: operation,
        caller: stream.caller,
        services,
        loaders: createLoaders(services, stream.caller.organizationId),
        log: stream.log,
        lifecycleStreams: subscriptions,
        deliveryActivity: deps.deliveryActivity,
      };
      stream.log.info({ operationName: params.operationName ?? null }, "SSE subscription started");
      if (deps.tracer)
        tracedOperations.set(contextValue, { document: prepared.document, operationName: params.operationName });
      return {
        schema,
        document: prepared.document,
        variableValues: params.variables ?? {},
        operationName: params.operationName ?? null,
        contextValue,
      };
    },
    // Paced by the socket: see the top.
    onOperation: (_context, request, _args, result) =>
      isAsyncIterator(result) ? pacedBy(request.context.stream.response, result) : undefined,
    onNext: (context, request, result) => {
      if (deps.tracer) traceSubscriptionMessage(deps.tracer, "sse", tracedOperations.get(context) ?? null);
      const errors = (result as ExecutionResult).errors as readonly GraphQLError[] | undefined;
      if (!errors || errors.length === 0) return;
      masking.logUnexpected(request.context.stream.log, errors, null);
      // Sent as JSON: the formatted errors take the place of the errors (typed as GraphQLError by graphql-sse).
      return { ...result, errors: format(errors) } as unknown as ExecutionResult;
    },
    onComplete: (_context, request) => {
      request.context.stream.log.info("SSE subscription completed");
    },
  });

  const liveDocuments = new LiveDocuments(new DocumentResolver(services.trustedDocuments));

  /** The request's URL and body as graphql-sse is to read them: with the document's text, or its refusal. */
  const resolveDocument = async (
    request: FastifyRequest,
    caller: Caller,
  ): Promise<{ readonly url: string; readonly body: unknown } | GraphQLError> => {
    const get = request.method === "GET";
    const parameters = (get ? request.query : request.body) as Record<string, unknown> | null | undefined;
    // Anything but an object is graphql-sse's to refuse.
    if (typeof parameters !== "object" || parameters === null || Array.isArray(parameters))
      return { url: request.url, body: request.body };
    const document = await liveDocuments.documentOf(caller, {
      query: parameters.query,
      documentId: parameters.documentId,
      extensions: get ? parsedJson(parameters.extensions) : parameters.extensions,
    });
    if (document instanceof GraphQLError) return document;
    if (document === parameters.query) return { url: request.url, body: request.body };
    const { documentId: _named, ...rest } = parameters;
    if (!get) return { url: request.url, body: { ...rest, query: document } };
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries({ ...rest, query: document }))
      for (const each of [value].flat()) if (typeof each === "string") search.append(name, each);
    return { url: `${SSE_ENDPOINT}?${search.toString()}`, body: request.body };
  };

  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    if (closing) return reply.code(503).send(errorBody([{ message: "The server is shutting down" }]));
    const key = presentedApiKey(request.headers);
    let caller: Caller | null = null;
    let refusal = REFUSAL_MESSAGES.missing;
    try {
      const authentication = await authenticateHeaders(services, request.headers);
      caller = authentication.caller;
      if (!authentication.caller) refusal = authentication.message;
    } catch (error) {
      if (!deps.isServiceUnavailable(error)) throw error;
      request.log.error({ err: error }, "database unavailable");
      return reply
        .code(503)
        .header("retry-after", "5")
        .send(errorBody([{ message: SERVICE_UNAVAILABLE_MESSAGE, extensions: { code: SERVICE_UNAVAILABLE } }]));
    }
    if (!caller || key === null) {
      const message = refusal;
      return reply
        .code(401)
        .header("www-authenticate", AUTHENTICATION_CHALLENGE)
        .send(errorBody([{ message, extensions: { code: "UNAUTHENTICATED" } }]));
    }
    // A registered document named by id becomes the request with its text; a trusted-documents-only key's text
    // that is not registered is refused (src/pipeline/trusted-documents/), before the stream opens.
    let operation: { readonly url: string; readonly body: unknown };
    try {
      const resolved = await resolveDocument(request, caller);
      if (resolved instanceof GraphQLError) return reply.code(400).send(errorBody(format([resolved])));
      operation = resolved;
    } catch (error) {
      if (!deps.isServiceUnavailable(error)) throw error;
      request.log.error({ err: error }, "database unavailable");
      return reply
        .code(503)
        .header("retry-after", "5")
        .send(errorBody([{ message: SERVICE_UNAVAILABLE_MESSAGE, extensions: { code: SERVICE_UNAVAILABLE } }]));
    }
    const open = perOrganization.get(caller.organizationId) ?? 0;
    const limit = config.subscriptionMaxStreamsPerOrganization;
    if (open >= limit) {
      // A stream frees its place only when a client closes it: no time can be promised, so a short, fixed wait.
      return reply
        .code(429)
        .header("retry-after", String(STREAM_LIMIT_RETRY_AFTER_SECONDS))
        .send(
          errorBody([
            {
              message: `At most ${limit} streams may be open at once per organization`,
              extensions: { code: "LIMIT_EXCEEDED", limit },
            },
          ]),
        );
    }
    const stream: OpenStream = { caller, key, response: reply.raw, log: request.log };
    streams.add(stream);
    perOrganization.set(caller.organizationId, open + 1);
    reply.raw.once("close", () => {
      streams.delete(stream);
      const left = (perOrganization.get(caller.organizationId) ?? 1) - 1;
      if (left > 0) perOrganization.set(caller.organizationId, left);
      else perOrganization.delete(caller.organizationId);
    });
    // The response is written here, event by event, not by Fastify.
    reply.hijack();
    try {
      const [body, init] = await handler({
        method: request.method,
        url: operation.url,
        headers: { get: (name) => headerValue(request.headers[name.toLowerCase()]) },
        body: (operation.body ?? null) as Record<string, unknown> | string | null,
        raw: request,
        context: { stream },
      });
      await writeResponse(reply.raw, body, init);
    } catch (error) {
      request.log.error({ err: error }, "SSE subscription failed");
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { "content-type": "application/json; charset=utf-8" });
        reply.raw.end(
          JSON.stringify(
            errorBody([{ message: "Internal server error", extensions: { code: "INTERNAL_SERVER_ERROR" } }]),
          ),
        );
      } else reply.raw.end();
    }
  };
  app.route({ method: ["GET", "POST"], url: SSE_ENDPOINT, handler: serve });

  // Keys can be revoked while a stream is open: check the keys in use again, one lookup per distinct key.
  let rechecking = false;
  const recheckTimer = setInterval(() => {
    if (rechecking || streams.size === 0) return;
    rechecking = true;
    void recheckKeys()
      .catch((error: unknown) => log.error({ err: error }, "re-checking SSE subscription API keys failed"))
      .finally(() => {
        rechecking = false;
      });
  }, config.subscriptionAuthRecheckIntervalMs);
  recheckTimer.unref();

  async function recheckKeys(): Promise<void> {
    for (const key of new Set([...streams].map((stream) => stream.key))) {
      if (await services.organizations.authenticate(key)) continue;
      for (const stream of streams) {
        if (stream.key !== key) continue;
        stream.log.info("ending SSE subscription: its API key was revoked");
        stream.response.end();
      }
    }
  }

  app.addHook("preClose", async () => {
    closing = true;
    clearInterval(recheckTimer);
    for (const stream of streams) stream.response.end();
  });
}

function errorBody(errors: readonly GraphQLFormattedError[]): { errors: readonly GraphQLFormattedError[] } {
  return { errors };
}

function errorResponse(
  status: number,
  errors: readonly GraphQLFormattedError[],
  headers: Readonly<Record<string, string>> = {},
): Response {
  return [
    JSON.stringify(errorBody(errors)),
    {
      status,
      statusText: status === 400 ? "Bad Request" : "Error",
      headers: { ...headers, "content-type": "application/json; charset=utf-8" },
    },
  ];
}

function parsedJson(text: unknown): unknown {
  if (typeof text !== "string") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function headerValue(value: string | string[] | undefined): string | null {
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(", ") : value;
}
