import type { Context as TraceContext } from "@opentelemetry/api";
import type { GraphQLError } from "graphql";
import type { BudgetCharge } from "../domain/budgets/cost-budget.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { PreparedDocument } from "./documents/prepared-documents.ts";

/*
 * The request value: one GraphQL operation on its way through the pipeline (graphql-pipeline.ts). A transport
 * makes it from its input (an HTTP request, a graphql-ws subscribe message, an SSE request) and hands it to the
 * stages in order; each stage writes what it decided here, and the stages after it read it. No stage reads a
 * framework's request object, and no transport reads what a stage decided except through this value.
 */

/** Where an operation came from. */
export type GraphqlTransport = "http" | "graphql-ws" | "sse";

/** The logger of the request or connection (pino's, through Fastify): what the stages log with. */
export interface RequestLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** What a request says about its document and how to run it, as sent (each field unchecked). */
export interface OperationSource {
  readonly query?: unknown;
  readonly documentId?: unknown;
  readonly operationName?: unknown;
  readonly variables?: unknown;
  readonly extensions?: unknown;
}

/** The operation's cost: the estimate it is charged (prepare), then the charge (charge). */
export interface OperationCost {
  requested: number | null;
  charge: BudgetCharge | null;
}

/** The operation's place in the read cache (look up), while its answer is being computed (HTTP only). */
export interface ReadCacheSlot {
  readonly key: string;
  /** The operation turned out to be a query: its lookup counts as a miss. */
  read: boolean;
  /** Its answer may be kept (a cacheable query answered without errors). */
  cacheable: boolean;
}

export interface OperationRequest {
  readonly transport: GraphqlTransport;
  readonly log: RequestLog;
  /** HTTP headers, or graphql-ws `connectionParams`: where the API key is presented. */
  readonly credentials: Readonly<Record<string, unknown>>;
  /** The document as named by the request; once resolved, `query` holds the text to run. */
  source: OperationSource;
  /** authenticate: the key's holder. */
  caller: Caller | null;
  /**
   * Set by a stage that decided the answer before execution (unauthenticated, outage, refused document): the
   * transport answers it as it answers every GraphQL error.
   */
  failure: GraphQLError | null;
  /** resolve the document: it was refused (charged as a refusal: requested 0). */
  documentRefused: boolean;
  /** prepare: the document's operation and what is decided once per document. */
  prepared: PreparedDocument | null;
  readonly cost: OperationCost;
  /** look up (HTTP): the read cache's slot of a request it could not answer. */
  cache: ReadCacheSlot | null;
  /** admit: resolves when a read may run (the transport knows when its client has gone). */
  readonly waitForTurn: ((organizationId: string | undefined) => Promise<void>) | null;
  /** When traces are on: the request's trace context, the parent of the operation's span. */
  readonly traceParent: TraceContext | undefined;
}

/** A new request value, before any stage. */
export function newOperationRequest(init: {
  readonly transport: GraphqlTransport;
  readonly log: RequestLog;
  readonly credentials: Readonly<Record<string, unknown>>;
  readonly source: OperationSource;
  readonly caller?: Caller | null;
  readonly waitForTurn?: (organizationId: string | undefined) => Promise<void>;
  readonly traceParent?: TraceContext;
}): OperationRequest {
  return {
    transport: init.transport,
    log: init.log,
    credentials: init.credentials,
    source: init.source,
    caller: init.caller ?? null,
    failure: null,
    documentRefused: false,
    prepared: null,
    cost: { requested: null, charge: null },
    cache: null,
    waitForTurn: init.waitForTurn ?? null,
    traceParent: init.traceParent,
  };
}

/** The request's variables when sent as an object (GET's text is Apollo's to parse). */
export function variablesOf(request: OperationRequest): Readonly<Record<string, unknown>> | null {
  const { variables } = request.source;
  return typeof variables === "object" && variables !== null && !Array.isArray(variables)
    ? (variables as Record<string, unknown>)
    : null;
}

/** `extensions.persistedQuery`, as sent. */
export function persistedQueryOf(extensions: unknown): unknown {
  return typeof extensions === "object" && extensions !== null
    ? (extensions as { persistedQuery?: unknown }).persistedQuery
    : undefined;
}

/** `extensions` without `persistedQuery` (consumed by the resolution), or undefined when nothing else is left. */
export function withoutPersistedQuery(extensions: unknown): Record<string, unknown> | undefined {
  if (typeof extensions !== "object" || extensions === null || Array.isArray(extensions)) return undefined;
  const { persistedQuery: _consumed, ...rest } = extensions as Record<string, unknown>;
  return Object.keys(rest).length > 0 ? rest : undefined;
}
