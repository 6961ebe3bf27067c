import { context, trace, type Context as TraceContext, type Span, type Tracer } from "@opentelemetry/api";
import type {
  ApolloServerOptionsWithGateway,
  ApolloServerPlugin,
  BaseContext,
  GraphQLRequestListener,
} from "@apollo/server";
import { ATTR_ERROR_TYPE } from "@opentelemetry/semantic-conventions";

/*
 * One span per GraphQL operation over HTTP, a child of its request's span and the parent of the statements its
 * resolvers run. It starts once Apollo has resolved the operation (its name and type known, the cost estimated),
 * is the active span while the operation executes (the gateway's executor runs inside it: Apollo's plugin hooks
 * cannot wrap execution) and ends when the response is ready. Its parent is handed over in the request's context
 * value, not found as the active context: the GraphQL route leaves Apollo's pipeline without one (http-spans.ts).
 */

/** The attributes of an operation span (graphql.* as OpenTelemetry's semantic conventions name them). */
export const GRAPHQL_OPERATION_NAME = "graphql.operation.name";
export const GRAPHQL_OPERATION_TYPE = "graphql.operation.type";
/** The operation's estimated cost (src/pipeline/documents/limits.ts), the figure the cost limit is checked against. */
export const GRAPHQL_ESTIMATED_COST = "reftrail.graphql.estimated_cost";

type Gateway = NonNullable<ApolloServerOptionsWithGateway<BaseContext>["gateway"]>;

export class GraphqlOperationSpans<Context extends BaseContext> {
  /** Open operation spans, by the request's context value (one per request, the executor's `request.context`). */
  private readonly open = new WeakMap<object, Span>();

  constructor(
    private readonly tracer: Tracer,
    /** The operation's estimated cost, once the cost check has run (undefined when it did not). */
    private readonly estimatedCost: (contextValue: Context) => number | undefined,
    /** The request's trace context, the operation span's parent (undefined: the context active where it starts). */
    private readonly parentOf: (contextValue: Context) => TraceContext | undefined,
  ) {}

  /**
   * The Apollo plugin that starts and ends the spans; place it after the cost plugin. Its listeners are one object
   * for every request (what they need comes with each call), not closures made per request.
   */
  plugin(): ApolloServerPlugin<Context> {
    const listeners: GraphQLRequestListener<Context> = {
      didResolveOperation: async ({ operation, operationName, contextValue }) => {
        // Typed as present, but absent when the document names no operation Apollo could pick.
        this.open.set(contextValue, this.start(contextValue, operation?.operation ?? "unknown", operationName));
      },
      willSendResponse: async ({ contextValue, errors }) => {
        const span = this.open.get(contextValue);
        if (!span) return;
        this.open.delete(contextValue);
        this.end(span, contextValue, errors?.[0]?.extensions.code);
      },
    };
    return { requestDidStart: async () => listeners };
  }

  /**
   * The same span around a query that runs without Apollo (src/graphql/direct-queries.ts): `execute` runs with it
   * active; it ends once `execute` has settled.
   */
  async around<T>(
    contextValue: Context,
    operationName: string | null,
    execute: () => Promise<T>,
    errorCode: (result: T) => unknown,
  ): Promise<T> {
    const span = this.start(contextValue, "query", operationName);
    let code: unknown;
    try {
      const result = await context.with(trace.setSpan(context.active(), span), execute);
      code = errorCode(result);
      return result;
    } catch (error) {
      code = "INTERNAL_SERVER_ERROR";
      throw error;
    } finally {
      this.end(span, contextValue, code);
    }
  }

  private start(contextValue: Context, type: string, operationName: string | null | undefined): Span {
    // Attributes set on the started span, not given to `startSpan`: see src/store/sql/traced-executor.ts.
    const span = this.tracer
      .startSpan(
        operationName ? `${type} ${operationName}` : type,
        undefined,
        this.parentOf(contextValue) ?? context.active(),
      )
      .setAttribute(GRAPHQL_OPERATION_TYPE, type);
    if (operationName) span.setAttribute(GRAPHQL_OPERATION_NAME, operationName);
    return span;
  }

  private end(span: Span, contextValue: Context, errorCode: unknown): void {
    const cost = this.estimatedCost(contextValue);
    if (cost !== undefined) span.setAttribute(GRAPHQL_ESTIMATED_COST, cost);
    if (typeof errorCode === "string") span.setAttribute(ATTR_ERROR_TYPE, errorCode);
    span.end();
  }

  /** `gateway`, its executor run with the request's operation span active. */
  gateway(gateway: Gateway): Gateway {
    return {
      ...gateway,
      load: async (options) => {
        const loaded = await gateway.load(options);
        const executor = loaded.executor;
        if (!executor) return loaded;
        return {
          ...loaded,
          executor: (request) => {
            const span = this.open.get(request.context);
            if (!span) return executor(request);
            return context.with(trace.setSpan(context.active(), span), executor, undefined, request);
          },
        };
      },
    };
  }
}
