import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { GraphQLError, type FormattedExecutionResult, type GraphQLFormattedError, type GraphQLSchema } from "graphql";
import type { Context } from "graphql-ws";
import { useServer, type Extra } from "graphql-ws/use/ws";
import type { Tracer } from "@opentelemetry/api";
import type { Registry } from "prom-client";
import { traceSubscriptionMessage } from "../tracing/subscription-spans.ts";
import { WebSocketServer, type RawData, type WebSocket } from "ws";
import { presentedApiKey, REFUSAL_MESSAGES } from "../pipeline/access/authentication.ts";
import type { Config } from "../config.ts";
import type { LiveSubscriptions } from "../live/live-subscriptions.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { Services } from "../domain/services.ts";
import type { DeliveryActivityService } from "../domain/webhooks/delivery-activity.ts";
import { createGraphqlErrorMasking } from "../pipeline/errors/error-masking.ts";
import { registerSubscriptionMetrics } from "../live/subscription-metrics.ts";
import type { GraphqlPipeline } from "../pipeline/graphql-pipeline.ts";
import { newOperationRequest, type OperationRequest } from "../pipeline/operation-request.ts";
import { GRAPHQL_ENDPOINT } from "./graphql-server.ts";
import { createLoaders } from "./loaders.ts";
import { closeSockets, refuseUpgrade } from "./websocket-sockets.ts";
import type { SubscriptionContext } from "./resolvers/subscription.resolvers.ts";
import { INEXACT_NUMBER, inexactNumberReason } from "../domain/shared/exact-json.ts";
import { findUnderflowedNumbers } from "../domain/shared/underflow-scanner.ts";
import { variableIssueError } from "../pipeline/errors/graphql-errors.ts";

/*
 * GraphQL over WebSocket (graphql-ws, protocol `graphql-transport-ws`) on the GraphQL endpoint's own path and
 * port. Apollo does not serve these operations; they take the same request pipeline as HTTP
 * (src/pipeline/graphql-pipeline.ts): the document resolved and prepared once (same rules and limits), every
 * operation charged to the key's budget before it runs (THROTTLED when the budget holds less, as over HTTP; a
 * query or mutation publishes its `extensions.cost` with its result), and the same error masking and logging.
 *
 * Authentication. Close codes:
 *   4401  no key, an unknown key, a revoked or an expired key (the reason says "expired"); also when revoked or
 *         expired while connected (keys are checked again every SUBSCRIPTION_AUTH_RECHECK_INTERVAL)
 *   4403  an operation presented a key of another organization than the connection's
 *   1001  the server is shutting down (reconnect and resume with the last cursor)
 * The key comes in `connection_init`'s payload (`connectionParams`: `{ "x-api-key": key }` or
 * `{ "authorization": "Bearer key" }`). GraphiQL cannot put one there: it sends its headers editor with each
 * operation, in the subscribe message's `payload.extensions.headers`. So a connection without a key is
 * acknowledged, but its first operation must carry a key (else 4401), and one that sends no operation within
 * AUTH_GRACE_MS is closed with 4401.
 */

export const SUBSCRIPTION_CLOSE_CODES = {
  unauthorized: 4401,
  forbidden: 4403,
  goingAway: 1001,
} as const;

/** How long a connection without a key in connectionParams may wait before its first (keyed) operation. */
const AUTH_GRACE_MS = 10_000;
/** graphql-ws's keep-alive: a ping every interval; a socket that does not answer within one more is dropped. */
const KEEP_ALIVE_MS = 12_000;

export interface SubscriptionDependencies {
  /** The executable schema GraphQL over HTTP serves (src/graphql/schema.ts, built once by the composition root). */
  readonly schema: GraphQLSchema;
  readonly services: Services;
  readonly config: Config;
  /** The live subscriptions (live-subscriptions.ts), built and closed by the composition root. */
  readonly subscriptions: LiveSubscriptions;
  /** Where the subscription gauges are registered (the `/metrics` registry). */
  readonly metrics?: Registry;
  /** Serves `webhookDeliveryAttempts` (the operator page); its signals are owned by the composition root. */
  readonly deliveryActivity?: DeliveryActivityService;
  /** Recognizes an error that means the database is unreachable right now (SERVICE_UNAVAILABLE). */
  readonly isServiceUnavailable: (error: unknown) => boolean;
  /** The request pipeline every operation goes through (src/pipeline/graphql-pipeline.ts). */
  readonly pipeline: GraphqlPipeline;
  /** When tracing is on: a span per message sent (src/tracing/subscription-spans.ts). */
  readonly tracer?: Tracer;
}

/** One WebSocket connection: who it is, and the keys it presented (checked again for revocation). */
interface ConnectionSession {
  readonly id: string;
  readonly socket: WebSocket;
  readonly log: FastifyBaseLogger;
  readonly openedAt: number;
  caller: Caller | undefined;
  readonly keys: Set<string>;
  /** Each running operation's request value, by its id (its cost is published with its result). */
  readonly operations: Map<string, OperationRequest>;
  authTimer: ReturnType<typeof setTimeout> | undefined;
  /** Subscribe messages (by operation id) whose variables hold a number that underflowed to 0, and its path. */
  readonly underflowed: Map<string, readonly (string | number)[]>;
}

/**
 * The operation id and the variable path of the first number of a subscribe message's variables that is not zero as
 * written but parses to 0 (`1e-400`), or null. graphql-ws parses messages itself, so the text is read here first.
 */
function findUnderflowedVariable(text: string): { id: string; path: (string | number)[] } | null {
  const path = findUnderflowedNumbers(text).find(
    (found) => found[0] === "payload" && found[1] === "variables" && found.length > 2,
  );
  if (!path) return null;
  const message = JSON.parse(text) as { id?: unknown };
  return typeof message.id === "string" ? { id: message.id, path: path.slice(2) } : null;
}

/** What the graphql-ws hooks below need from their context. */
type ServerContext = Pick<Context<Record<string, unknown> | undefined, Extra>, "extra">;

/**
 * Serves subscriptions on the Fastify instance's HTTP server: `ws(s)://host:port/graphql`. Transport only:
 * authentication, operation checks, errors and metrics; the events come from `deps.subscriptions`. Sockets get
 * 1001 before the HTTP server stops (preClose).
 */
export async function registerSubscriptions(app: FastifyInstance, deps: SubscriptionDependencies): Promise<void> {
  const { schema, services, config, subscriptions } = deps;
  const log = app.log.child({ component: "subscriptions" });

  const masking = createGraphqlErrorMasking(deps.isServiceUnavailable);
  const { pipeline } = deps;
  const sessions = new Map<WebSocket, ConnectionSession>();
  const wss = new WebSocketServer({ noServer: true, maxPayload: config.bodyLimitBytes, perMessageDeflate: false });
  let closing = false;

  const close = (session: ConnectionSession, code: number, reason: string) => {
    session.log.info({ code, reason }, "closing graphql-ws connection");
    session.socket.close(code, reason);
  };

  wss.on("connection", (socket: WebSocket, request: IncomingMessage) => {
    const id = randomUUID();
    const session: ConnectionSession = {
      id,
      socket,
      log: log.child({ connectionId: id }),
      openedAt: Date.now(),
      caller: undefined,
      keys: new Set(),
      operations: new Map(),
      authTimer: undefined,
      underflowed: new Map(),
    };
    sessions.set(socket, session);
    // Before graphql-ws parses the message (its listener comes after this one): see findUnderflowedVariable.
    socket.prependListener("message", (data: RawData) => {
      try {
        const found = findUnderflowedVariable(String(data));
        if (found) session.underflowed.set(found.id, found.path);
      } catch {
        // Not JSON: graphql-ws closes the connection for it.
      }
    });
    session.log.info(
      { remoteAddress: request.socket.remoteAddress, protocol: socket.protocol },
      "graphql-ws connection opened",
    );
    socket.once("close", (code: number, reason: Buffer) => {
      clearTimeout(session.authTimer);
      sessions.delete(socket);
      session.log.info(
        { code, reason: reason.toString(), durationMs: Date.now() - session.openedAt },
        "graphql-ws connection closed",
      );
    });
  });

  const sessionOf = (ctx: ServerContext): ConnectionSession => {
    const session = sessions.get(ctx.extra.socket);
    if (!session) throw new Error("graphql-ws message on a socket without a session");
    return session;
  };

  /** Authenticates a key presented by the connection or an operation; closes the socket and returns null if refused. */
  const admit = async (session: ConnectionSession, key: string): Promise<Caller | null> => {
    const caller = await services.organizations.authenticateOrRefuse(key);
    if (typeof caller === "string") {
      // An expired key is told so, as over HTTP (SPEC §3.1); unknown and revoked keys are not told apart.
      close(session, SUBSCRIPTION_CLOSE_CODES.unauthorized, `Unauthorized: ${REFUSAL_MESSAGES[caller]}`);
      return null;
    }
    if (session.caller && session.caller.organizationId !== caller.organizationId) {
      close(
        session,
        SUBSCRIPTION_CLOSE_CODES.forbidden,
        "Forbidden: the key belongs to another organization than the connection's",
      );
      return null;
    }
    session.caller ??= caller;
    session.keys.add(key);
    clearTimeout(session.authTimer);
    return caller;
  };

  const format = (errors: readonly GraphQLError[]): GraphQLFormattedError[] =>
    errors.map((error) => masking.format(error.toJSON(), error));

  useServer<Record<string, unknown> | undefined>(
    {
      schema,
      // A connection with a bad key is refused; one without a key waits for a keyed operation (see above).
      onConnect: async (ctx) => {
        const session = sessionOf(ctx);
        const key = presentedApiKey(lowerCaseKeys(ctx.connectionParams));
        if (key === null) {
          session.authTimer = setTimeout(() => {
            if (!session.caller)
              close(
                session,
                SUBSCRIPTION_CLOSE_CODES.unauthorized,
                "Unauthorized: send an API key in connectionParams",
              );
          }, AUTH_GRACE_MS);
          session.authTimer.unref();
          return true;
        }
        return (await admit(session, key)) !== null;
      },

      // Everything Apollo does before executing an HTTP operation: authentication, parsing, validation with the
      // same rules, variable coercion and the cost limit. Returned errors reach the client as an `error` message.
      onSubscribe: async (ctx, id, payload) => {
        const session = sessionOf(ctx);
        const underflowed = session.underflowed.get(id);
        session.underflowed.delete(id);
        const operationKey = presentedApiKey(lowerCaseKeys(payload.extensions?.headers));
        let caller = session.caller;
        if (operationKey !== null && !session.keys.has(operationKey))
          caller = (await admit(session, operationKey)) ?? undefined;
        else if (!caller)
          close(session, SUBSCRIPTION_CLOSE_CODES.unauthorized, "Unauthorized: send an API key in connectionParams");
        if (!caller) return [new GraphQLError("Unauthorized", { extensions: { code: "UNAUTHENTICATED" } })];

        if (Object.keys(ctx.subscriptions).length > config.subscriptionMaxOperationsPerConnection) {
          return [
            new GraphQLError(
              `At most ${config.subscriptionMaxOperationsPerConnection} operations may run at once on one connection`,
              {
                extensions: { code: "LIMIT_EXCEEDED", limit: config.subscriptionMaxOperationsPerConnection },
              },
            ),
          ];
        }
        if (underflowed) {
          const message = `this number ${inexactNumberReason(Number.NaN)!}`;
          return [variableIssueError({ path: underflowed, code: INEXACT_NUMBER, message })];
        }
        // The pipeline's stages 2, 4 and 6 (1 ran when the key was presented): the document resolved (trusted
        // documents), prepared once, and the operation charged before it runs.
        const request = newOperationRequest({
          transport: "graphql-ws",
          log: session.log.child({ operationId: id }),
          credentials: {},
          caller,
          source: payload,
        });
        await pipeline.resolveDocument(request, { liveOnly: true });
        if (request.failure) return [withoutHttp(request.failure)];
        const refusals = pipeline.prepare(request);
        const prepared = request.prepared;
        if (refusals || !prepared) return [...(refusals ?? [])];
        const refused = await pipeline.charge(request);
        if (refused) return [refused.error];
        session.operations.set(id, request);
        const contextValue: SubscriptionContext = {
          request,
          caller,
          services,
          loaders: createLoaders(services, caller.organizationId),
          log: session.log.child({ operationId: id }),
          lifecycleStreams: subscriptions,
          deliveryActivity: deps.deliveryActivity,
        };
        session.log.info(
          { operationId: id, operationName: payload.operationName ?? null, operation: prepared.kind },
          "graphql-ws operation started",
        );
        return {
          schema,
          document: prepared.document,
          variableValues: payload.variables ?? {},
          operationName: payload.operationName ?? null,
          contextValue,
        };
      },

      // Results and errors take the HTTP path's masking: coded errors pass, others are masked and logged.
      onNext: async (ctx, id, payload, args, result) => {
        if (deps.tracer) traceSubscriptionMessage(deps.tracer, "graphql-ws", args, id);
        const session = sessionOf(ctx);
        // 8. A query's or mutation's one result publishes what it cost, as over HTTP.
        const request = session.operations.get(id);
        const cost =
          request && request.prepared?.kind !== "subscription" ? await pipeline.publish(request, result, false) : null;
        const errors = result.errors && result.errors.length > 0 ? result.errors : null;
        if (errors) masking.logUnexpected(session.log, errors, payload.operationName);
        if (!errors && !cost) return;
        const formatted: FormattedExecutionResult = {
          ...result,
          ...(errors && { errors: format(errors) }),
          ...(cost && { extensions: { ...result.extensions, cost } }),
        };
        return formatted;
      },
      onError: (ctx, _id, payload, errors) => {
        masking.logUnexpected(sessionOf(ctx).log, errors, payload.operationName);
        return format(errors);
      },
      onComplete: (ctx, id) => {
        const session = sessions.get(ctx.extra.socket);
        session?.operations.delete(id);
        session?.log.info({ operationId: id }, "graphql-ws operation completed");
      },
    },
    wss,
    KEEP_ALIVE_MS,
  );

  // Keys can be revoked while a connection is open: check the keys in use again, one lookup per distinct key.
  let rechecking = false;
  const recheckTimer = setInterval(() => {
    if (rechecking || sessions.size === 0) return;
    rechecking = true;
    void recheckKeys()
      .catch((error: unknown) => log.error({ err: error }, "re-checking subscription API keys failed"))
      .finally(() => {
        rechecking = false;
      });
  }, config.subscriptionAuthRecheckIntervalMs);
  recheckTimer.unref();

  async function recheckKeys(): Promise<void> {
    const keys = new Set([...sessions.values()].flatMap((session) => [...session.keys]));
    for (const key of keys) {
      const outcome = await services.organizations.authenticateOrRefuse(key);
      if (typeof outcome !== "string") continue;
      const reason = outcome === "expired" ? "the API key expired" : "the API key was revoked";
      for (const session of sessions.values()) {
        if (session.keys.has(key)) close(session, SUBSCRIPTION_CLOSE_CODES.unauthorized, `Unauthorized: ${reason}`);
      }
    }
  }

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = (request.url ?? "").split("?")[0];
    if (path !== GRAPHQL_ENDPOINT) return refuseUpgrade(socket, 404, "Not Found");
    if (closing) return refuseUpgrade(socket, 503, "Service Unavailable");
    wss.handleUpgrade(request, socket, head, (ws) => wss.emit("connection", ws, request));
  };
  app.server.on("upgrade", onUpgrade);

  app.addHook("preClose", async () => {
    closing = true;
    clearInterval(recheckTimer);
    app.server.off("upgrade", onUpgrade);
    await closeSockets(
      [...wss.clients],
      SUBSCRIPTION_CLOSE_CODES.goingAway,
      "Server shutting down: reconnect and resume with the last cursor",
    );
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });

  registerSubscriptionMetrics(deps.metrics, { sessions, subscriptions, deliveryActivity: deps.deliveryActivity });
}

/** A refusal as graphql-ws sends it: its HTTP head means nothing on a socket. */
function withoutHttp(error: GraphQLError): GraphQLError {
  const { http: _head, ...extensions } = error.extensions;
  return new GraphQLError(error.message, { extensions });
}

/** Header-like maps with lower-case names: `X-API-Key` from GraphiQL's headers editor, `x-api-key` from clients. */
function lowerCaseKeys(value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null) return {};
  return Object.fromEntries(Object.entries(value).map(([name, entry]) => [name.toLowerCase(), entry]));
}
