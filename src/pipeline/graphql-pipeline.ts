import { HeaderMap } from "@apollo/server";
import { GraphQLError, type DocumentNode } from "graphql";
import type { CostBudgetService } from "../domain/budgets/cost-budget-service.ts";
import type { BudgetCharge } from "../domain/budgets/cost-budget.ts";
import type { Services } from "../domain/services.ts";
import { authenticateHeaders } from "./access/authentication.ts";
import { actualOperationCost } from "./budget/actual-cost.ts";
import { splitPublishedCost } from "./budget/cached-cost.ts";
import { THROTTLED, throttledMessage, type PublishedCost } from "./budget/published-cost.ts";
import type { PreparedDocuments } from "./documents/prepared-documents.ts";
import { unauthenticated } from "./errors/graphql-errors.ts";
import { persistedQueryOf, variablesOf, withoutPersistedQuery, type OperationRequest } from "./operation-request.ts";
import { serviceUnavailable, UNAVAILABLE_RETRY_AFTER_SECONDS, type BytesAnswer, type EarlyAnswer } from "./answers.ts";
import { answerFromCache } from "./cached-answers.ts";
import {
  refusesCachedResponse,
  type CachedCost,
  type CachedResponse,
  type ReadCache,
} from "./read-cache/read-cache.ts";
import type { StageTimings } from "./stage-timings.ts";
import { AutomaticPersistedQueries } from "./trusted-documents/automatic-persisted-queries.ts";
import { DOCUMENT_REFUSALS, DocumentResolver, type DocumentRefusal } from "./trusted-documents/document-resolution.ts";

/*
 * One GraphQL operation's way through the server, the same for every transport (HTTP, graphql-ws, SSE). The
 * stages, in the order a request meets them:
 *
 *   1. authenticate          the API key -> the caller (401 UNAUTHENTICATED; 503 when the database is out)
 *   2. resolve the document  trusted documents: a `documentId` or a registered hash -> the text; a key that runs
 *                            registered documents only is refused anything else; over HTTP, automatic persisted
 *                            queries, kept per organization (trusted-documents/)
 *   3. look up the read cache  HTTP: an exact answer kept for the caller's read version is charged like the
 *                            answer it repeats and sent as its bytes; nothing below runs (read-cache/)
 *   4. prepare               parse, validate, limits, literal guard, cache decision: once per document, kept in
 *                            one bounded cache; per request only the variables and the cost estimate (documents/)
 *   5. admit                 a query waits for its turn among the instance's reads (admission/)
 *   6. charge                the estimate is charged to the key's budget: 429 THROTTLED when it holds less (budget/)
 *   7. execute               the transport's engine: Apollo Server over HTTP, graphql-js over graphql-ws and SSE
 *   8. publish               `extensions.cost` (the actual cost, the unused part given back), the answer kept by
 *                            the read cache when it may be, and the operation's span (tracing)
 *
 * Each stage is a method below, and writes what it decided into the request value (operation-request.ts). The
 * transports call them in this order; GraphQL over HTTP reaches stages 4 to 8 through one Apollo plugin, because
 * Apollo parses and validates the document and runs it (src/graphql/pipeline-plugin.ts; docs/architecture.md
 * tells why). Nothing here knows a transport.
 */

/** When the bench measures the stages: when each request's execution started (stage 7). */
const executionStarts = new WeakMap<OperationRequest, bigint>();

export interface GraphqlPipelineDependencies {
  readonly services: Pick<Services, "organizations" | "trustedDocuments">;
  /** Null only on the bench's "budget off" server (src/app.ts, `withoutCostBudget`). */
  readonly budgets: CostBudgetService | null;
  readonly readCache: ReadCache;
  readonly documents: PreparedDocuments;
  /** Recognizes an error that means the database is unreachable right now. */
  readonly isServiceUnavailable: (error: unknown) => boolean;
  /** The bench's per-stage measure; absent on a server. */
  readonly timings?: StageTimings;
}

export class GraphqlPipeline {
  readonly documents: PreparedDocuments;
  private readonly resolver: DocumentResolver;
  private readonly persistedQueries = new AutomaticPersistedQueries();
  private readonly timings: StageTimings | undefined;

  constructor(private readonly deps: GraphqlPipelineDependencies) {
    this.documents = deps.documents;
    this.resolver = new DocumentResolver(deps.services.trustedDocuments);
    this.timings = deps.timings;
  }

  /** 1. Finds the caller of the key the request presents; false, with `failure` set, when there is none. */
  async authenticate(request: OperationRequest): Promise<boolean> {
    const started = this.timings?.start();
    try {
      if (request.caller) return true;
      const authentication = await authenticateHeaders(this.deps.services, request.credentials);
      if (authentication.caller) {
        request.caller = authentication.caller;
        return true;
      }
      request.failure = unauthenticated(authentication.message);
      return false;
    } catch (error) {
      request.failure = this.unavailableOr(error, request);
      return false;
    } finally {
      if (started !== undefined) this.timings!.record("authenticate", started);
    }
  }

  /**
   * 2. Trusted documents: a request that names a registered document gets its text in `source.query` (and
   * true); a refused one gets its `failure`. `liveOnly`: the transport keeps no automatic persisted queries
   * (graphql-ws, SSE), so a hash that names no registered document is PERSISTED_QUERY_NOT_FOUND for every key.
   */
  async resolveDocument(request: OperationRequest, options: { readonly liveOnly: boolean }): Promise<boolean> {
    const started = this.timings?.start();
    try {
      const caller = request.caller!;
      const source = request.source;
      const persistedQuery = persistedQueryOf(source.extensions);
      const resolution = await this.resolver.resolve(caller, {
        query: source.query,
        documentId: source.documentId,
        persistedQuery,
      });
      if (resolution.kind === "refused") return this.refuseDocument(request, resolution.refusal);
      if (resolution.kind === "registered") return this.runText(request, resolution.query);
      const sentNoText = typeof source.query !== "string" || source.query === "";
      if (options.liveOnly) {
        if (sentNoText && persistedQuery !== undefined && persistedQuery !== null)
          return this.refuseDocument(request, DOCUMENT_REFUSALS.queryNotFound());
        return false;
      }
      const automatic = this.persistedQueries.resolve(caller, source.query, persistedQuery);
      if (automatic.kind === "refused") return this.refuseDocument(request, automatic.refusal);
      return automatic.kind === "text" ? this.runText(request, automatic.query) : false;
    } catch (error) {
      request.failure = this.unavailableOr(error, request);
      return false;
    } finally {
      if (started !== undefined) this.timings!.record("resolve the document", started);
    }
  }

  /**
   * 3. The kept answer of the operation key (what identifies the operation as sent, the transport's to spell) for
   * the caller, charged and published like the answer it repeats; null when there is none, the slot then ready for
   * the answer to be kept. A request with `Cache-Control: no-cache` is computed afresh.
   */
  async lookUp(
    request: OperationRequest,
    operationKeyOf: () => string | null,
    cacheControl: unknown,
  ): Promise<BytesAnswer | null> {
    const { caller } = request;
    if (!caller || request.failure || refusesCachedResponse(cacheControl)) return null;
    // Spelt only for a request the cache may answer: it serializes the whole operation.
    const operationKey = operationKeyOf();
    if (operationKey === null) return null;
    const started = this.timings?.start();
    const key = this.deps.readCache.keyOf(caller, operationKey);
    const hit = this.deps.readCache.findHit(key);
    const budgets = this.deps.budgets;
    if (!hit?.cost || !budgets) {
      request.cache = { key, read: false, cacheable: false };
      if (started !== undefined) this.timings!.record("look up the read cache", started);
      return null;
    }
    try {
      return await answerFromCache(request, hit as CachedResponse & { readonly cost: CachedCost }, {
        budgets,
        isServiceUnavailable: this.deps.isServiceUnavailable,
      });
    } finally {
      if (started !== undefined) this.timings!.record("look up the read cache", started);
    }
  }

  /**
   * 4. Over graphql-ws and SSE, and for queries over HTTP that run without Apollo: the document parsed, validated
   * and checked (once per document), then the request's variables; the refusals, or null with `prepared` and the
   * estimate set.
   */
  prepare(request: OperationRequest): readonly GraphQLError[] | null {
    const started = this.timings?.start();
    try {
      const text = typeof request.source.query === "string" ? request.source.query : "";
      const operationName = typeof request.source.operationName === "string" ? request.source.operationName : null;
      const prepared = this.documents.prepare(text, operationName, request.log);
      if (Array.isArray(prepared)) return prepared;
      request.prepared = prepared as Exclude<typeof prepared, readonly GraphQLError[]>;
      if (request.cache) request.cache.read = prepared.kind === "query";
      const checked = this.documents.checkVariables(request.prepared, operationName, variablesOf(request), true);
      if ("errors" in checked) return checked.errors;
      request.cost.requested = checked.cost;
      return null;
    } finally {
      if (started !== undefined) this.timings!.record("prepare", started);
    }
  }

  /**
   * 4. Over HTTP, once Apollo has parsed and validated the document: the same checks, on Apollo's document; the
   * first refusal, or null.
   */
  prepareParsed(
    request: OperationRequest,
    parsed: {
      readonly text: string;
      readonly operationName: string | null;
      readonly document: DocumentNode;
      readonly variables: Readonly<Record<string, unknown>> | null;
    },
  ): GraphQLError | null {
    const started = this.timings?.start();
    try {
      const { text, operationName, document, variables } = parsed;
      const prepared = this.documents.ofParsed(text, operationName, document);
      if (!prepared) return null;
      request.prepared = prepared;
      if (request.cache) request.cache.read = prepared.kind === "query";
      const checked = this.documents.checkVariables(prepared, operationName, variables, false);
      if ("errors" in checked) return checked.errors[0]!;
      request.cost.requested = checked.cost;
      return null;
    } finally {
      if (started !== undefined) this.timings!.record("prepare", started);
    }
  }

  /**
   * 5. A query waits for its turn among the instance's reads, in turn with other organizations' (admission/); a
   * mutation or a subscription does not.
   */
  async admit(request: OperationRequest): Promise<void> {
    if (request.prepared?.kind === "query" && request.waitForTurn) {
      const started = this.timings?.start();
      await request.waitForTurn(request.caller?.organizationId);
      if (started !== undefined) this.timings!.record("admit", started);
    }
    // 7. Execution starts now (measured up to publish, by the bench only).
    if (this.timings) executionStarts.set(request, this.timings.start());
  }

  /** 6. Charges the estimate to the caller's budget; the refusal when it holds less (or cannot be read). */
  async charge(request: OperationRequest): Promise<EarlyAnswer | null> {
    const { budgets } = this.deps;
    const caller = request.caller;
    if (!budgets || !caller) return null;
    const started = this.timings?.start();
    const requested = request.cost.requested ?? 0;
    let charge: BudgetCharge;
    try {
      charge = await budgets.charge(caller, requested);
    } catch (error) {
      if (!this.deps.isServiceUnavailable(error)) throw error;
      request.log.error({ err: error }, "database unavailable");
      return {
        status: 503,
        retryAfterSeconds: UNAVAILABLE_RETRY_AFTER_SECONDS,
        error: serviceUnavailable(),
        cost: null,
      };
    } finally {
      if (started !== undefined) this.timings!.record("charge", started);
    }
    request.cost.charge = charge;
    if (charge.granted) return null;
    return {
      status: 429,
      retryAfterSeconds: charge.retryAfterSeconds,
      error: new GraphQLError(throttledMessage(requested, charge), {
        extensions: { code: THROTTLED, retryAfterSeconds: charge.retryAfterSeconds },
      }),
      cost: { requestedQueryCost: requested, actualQueryCost: 0, throttleStatus: charge.status },
    };
  }

  /**
   * 8. What the operation cost, to publish as `extensions.cost`: a granted charge is settled to the actual cost
   * (the unused part given back); an operation refused before its charge requested 0 and reports the bucket as it
   * is. Marks a cacheable query's answer to be kept. Null without a budget, or when the bucket cannot be read.
   */
  async publish(
    request: OperationRequest,
    result: { readonly data?: unknown; readonly errors?: readonly unknown[] },
    answeredWithStatus: boolean,
  ): Promise<PublishedCost | null> {
    const executed = executionStarts.get(request);
    if (executed !== undefined) this.timings!.record("execute", executed);
    const started = this.timings?.start();
    try {
      const { caller, prepared, cost } = request;
      if (request.cache && prepared)
        request.cache.cacheable = prepared.cacheable && result.errors === undefined && !answeredWithStatus;
      const budgets = this.deps.budgets;
      if (!budgets || !caller) return null;
      const charge = cost.charge;
      if (!charge) return this.costOfRefusal(request);
      const actual =
        charge.granted && prepared
          ? actualOperationCost(prepared.document, prepared.operation, result.data as never, charge.charged)
          : 0;
      return {
        requestedQueryCost: cost.requested ?? 0,
        actualQueryCost: actual,
        throttleStatus: charge.granted ? budgets.settle(caller, charge, actual) : charge.status,
      };
    } finally {
      if (started !== undefined) this.timings!.record("publish", started);
    }
  }

  /**
   * Undoes a granted charge (all of it given back) for a request that will be run again from its start: GraphQL over
   * HTTP hands a query whose direct run met errors to Apollo (src/graphql/direct-queries.ts), which charges anew.
   */
  giveBack(request: OperationRequest): void {
    const { budgets } = this.deps;
    const { caller, cost } = request;
    if (budgets && caller && cost.charge?.granted) budgets.settle(caller, cost.charge, 0);
    cost.charge = null;
  }

  /** 8. Keeps the bytes of an answer marked cacheable (HTTP): up to its published cost, which a hit replaces. */
  keep(request: OperationRequest, status: number, payload: unknown, contentType: unknown): void {
    const slot = request.cache;
    if (!slot) return;
    if (slot.read) this.deps.readCache.countMiss();
    if (!slot.cacheable || status !== 200 || typeof payload !== "string" || typeof contentType !== "string") return;
    const split = splitPublishedCost(payload);
    if (split) this.deps.readCache.keep(slot.key, split.head, contentType, split.cost);
  }

  /** The cost of a request refused before its estimate: nothing requested, nothing charged, the bucket as it is. */
  async costOfRefusal(request: OperationRequest): Promise<PublishedCost | null> {
    const { budgets } = this.deps;
    if (!budgets || !request.caller) return null;
    try {
      const charge = await budgets.charge(request.caller, 0);
      return {
        requestedQueryCost: 0,
        actualQueryCost: 0,
        throttleStatus: charge.granted ? budgets.settle(request.caller, charge, 0) : charge.status,
      };
    } catch {
      return null;
    }
  }

  /** The request now runs `query`: the id or persisted query that named it is consumed. */
  private runText(request: OperationRequest, query: string): true {
    const { documentId: _named, extensions, ...rest } = request.source;
    const remaining = withoutPersistedQuery(extensions);
    request.source = { ...rest, query, ...(remaining && { extensions: remaining }) };
    return true;
  }

  private refuseDocument(request: OperationRequest, refusal: DocumentRefusal): false {
    request.documentRefused = true;
    request.failure = new GraphQLError(refusal.message, {
      extensions: {
        code: refusal.code,
        http: { status: refusal.status, headers: new HeaderMap([["cache-control", "no-store"]]) },
      },
    });
    return false;
  }

  /** A database outage as the 503 every transport answers; anything else is rethrown. */
  private unavailableOr(error: unknown, request: OperationRequest): GraphQLError {
    if (!this.deps.isServiceUnavailable(error)) throw error;
    request.log.error({ err: error }, "database unavailable");
    return serviceUnavailable();
  }
}
