import type { ApolloServerOptionsWithGateway } from "@apollo/server";
import type { DocumentNode, ExecutionResult, GraphQLSchema, OperationDefinitionNode } from "graphql";
import type * as GraphqlJit from "graphql-jit";
import type { CompiledQuery } from "graphql-jit";
import { LRUCache } from "lru-cache";
import { execute, getVariableValues, GraphQLError } from "graphql";

/*
 * Queries run as JavaScript compiled once per document (graphql-jit) instead of being interpreted by graphql-js on
 * every request: graphql-js walks the document, collects fields and reads each field's arguments for every object
 * it resolves, which cost more CPU than a reference's statements. Apollo Server hands execution to a gateway's
 * executor (`gateway.load()` returns it), the seam used here; everything before execution (parsing, validation,
 * the limit and guard plugins) and after it (error formatting, masking, the read cache) stays Apollo's.
 *
 * What stays graphql-js's, so that behaviour is the same:
 * - mutations and subscriptions (rare next to reads, and a mutation's order of side effects is graphql-js's);
 * - variable coercion: graphql-js coerces an operation's variables first and its errors are the answer (graphql-jit
 *   does not know `@oneOf` and words its errors differently); graphql-jit then coerces the same accepted values;
 * - the errors: graphql-jit's own error objects lack what Apollo and src/pipeline/errors/graphql-errors.ts read (`extensions` is
 *   absent when the cause has none), so each is rebuilt as graphql-js builds a field error (message, path,
 *   locations, the thrown error as `originalError`, its `extensions`);
 * - a document graphql-jit cannot compile runs on graphql-js.
 */

/** How many (query text, operation name) compilations are kept; a client usually sends a few dozen documents. */
const MAX_COMPILED_OPERATIONS = 500;

/** graphql-jit's compilation of one operation, or null when it could not compile it (graphql-js runs it). */
type Compilation = CompiledQuery | null;

type Gateway = NonNullable<ApolloServerOptionsWithGateway<object>["gateway"]>;
type GatewayExecutor = NonNullable<Awaited<ReturnType<Gateway["load"]>>["executor"]>;
type ExecutorRequest = Parameters<GatewayExecutor>[0];

/** A graphql-jit error as graphql-js reports a field error. */
function asGraphqlJsError(error: GraphQLError): GraphQLError {
  const original = error.originalError ?? undefined;
  const rebuilt = new GraphQLError(error.message, {
    path: error.path,
    originalError: original,
    ...(original instanceof GraphQLError || (original && "extensions" in original)
      ? { extensions: (original as { extensions?: Record<string, unknown> }).extensions }
      : {}),
  });
  // graphql-js computes `locations` from the field's AST nodes, which graphql-jit has already turned into locations.
  (rebuilt as { locations?: GraphQLError["locations"] }).locations = error.locations;
  return rebuilt;
}

/** graphql-jit, loaded by the first query that needs it rather than while the server starts. */
let graphqlJit: Promise<typeof GraphqlJit> | null = null;
const loadGraphqlJit = () => (graphqlJit ??= import("graphql-jit"));

export class CompiledExecutor {
  private readonly compilations = new LRUCache<string, { compilation: Compilation }>({ max: MAX_COMPILED_OPERATIONS });
  /** Compilations of prepared operations, by the operation's node: dropped with the document it belongs to. */
  private readonly preparedCompilations = new WeakMap<OperationDefinitionNode, { compilation: Compilation }>();

  constructor(private readonly schema: GraphQLSchema) {}

  /** Apollo Server's `gateway` option: serves {@link schema} and runs every operation through {@link execute}. */
  gateway(): Gateway {
    return {
      load: async () => ({ schema: this.schema, executor: (request) => this.execute(request) }),
      onSchemaLoadOrUpdate: (callback) => {
        callback({ apiSchema: this.schema, coreSupergraphSdl: "" });
        return () => {};
      },
      stop: async () => {},
    };
  }

  async execute(request: ExecutorRequest): Promise<ExecutionResult> {
    const { document, queryHash } = request;
    // Typed as present, but absent when the document names no operation Apollo could pick: graphql-js reports it.
    const operation = request.operation as OperationDefinitionNode | undefined;
    const variables = request.request.variables ?? {};
    const operationName = request.request.operationName ?? null;
    const compilation =
      operation?.operation === "query" ? await this.compilationOf(queryHash, document, operationName) : null;
    if (!operation || !compilation) {
      return execute({
        schema: this.schema,
        document,
        contextValue: request.context,
        variableValues: variables,
        operationName,
      });
    }
    // graphql-js's coercion decides whether the variables are accepted, and words the refusal (as `execute` would).
    const coerced = getVariableValues(this.schema, operation.variableDefinitions ?? [], variables, { maxErrors: 50 });
    if (coerced.errors) return { errors: coerced.errors };
    const result = await compilation.query(undefined, request.context, variables);
    if (!result.errors) return result;
    return { ...result, errors: result.errors.map(asGraphqlJsError) };
  }

  /**
   * A query the pipeline has prepared, with variables its prepare stage has already coerced and accepted (the
   * direct route, direct-queries.ts): compiled once per operation, kept by its node (the prepared documents' cache
   * bounds them; Apollo's documents are shared by the operations of one text), run like {@link execute}.
   */
  async runPrepared(
    prepared: { readonly document: DocumentNode; readonly operation: OperationDefinitionNode },
    operationName: string | null,
    variables: Readonly<Record<string, unknown>>,
    contextValue: unknown,
  ): Promise<ExecutionResult> {
    const { document, operation } = prepared;
    let known = this.preparedCompilations.get(operation);
    if (!known) {
      known = { compilation: await this.compile(document, operationName) };
      this.preparedCompilations.set(operation, known);
    }
    if (!known.compilation)
      return execute({ schema: this.schema, document, contextValue, variableValues: variables, operationName });
    const result = await known.compilation.query(undefined, contextValue, variables);
    if (!result.errors) return result;
    return { ...result, errors: result.errors.map(asGraphqlJsError) };
  }

  /** `queryHash`: Apollo's SHA-256 of the query text, the key of its own document store. */
  private async compilationOf(
    queryHash: string,
    document: DocumentNode,
    operationName: string | null,
  ): Promise<Compilation> {
    const key = `${queryHash} ${operationName ?? ""}`;
    const cached = this.compilations.get(key);
    if (cached) return cached.compilation;
    const compilation = await this.compile(document, operationName);
    this.compilations.set(key, { compilation });
    return compilation;
  }

  private async compile(document: DocumentNode, operationName: string | null): Promise<Compilation> {
    const { compileQuery, isCompiledQuery } = await loadGraphqlJit();
    const compiled = compileQuery(this.schema, document, operationName ?? undefined, {
      // The errors are rebuilt (asGraphqlJsError), with the stack of what was thrown.
      disablingCapturingStackErrors: true,
    });
    return isCompiledQuery(compiled) ? compiled : null;
  }
}
