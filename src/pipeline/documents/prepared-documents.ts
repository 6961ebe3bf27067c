import {
  getOperationAST,
  getVariableValues,
  GraphQLError,
  Kind,
  parse,
  specifiedRules,
  validate,
  type ASTNode,
  type DocumentNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from "graphql";
import { LRUCache } from "lru-cache";
import { Counter, Gauge, type Registry } from "prom-client";
import type { Config } from "../../config.ts";
import { findVariablesIssue, MAX_JSON_DEPTH } from "../../domain/shared/json-input.ts";
import { parseFailedError, variableIssueError } from "../errors/graphql-errors.ts";
import { isCacheableOperation } from "../read-cache/cacheable-operation.ts";
import { estimateOperationCost, graphqlParseOptions, graphqlValidationRules } from "./limits.ts";
import { findLiteralIssue, literalIssueError } from "./literal-guard.ts";
import { checkSelectionLimit } from "./selection-limit.ts";

/*
 * The pipeline's "prepare" stage (src/pipeline/graphql-pipeline.ts): everything that depends only on a document
 * and the operation it runs, done once per (operation name, text) and kept in one bounded cache. A request then
 * pays only for what depends on its variables: the variables guard, coercion, and its cost estimate when the
 * estimate depends on them (an estimate is remembered per value of the variables it reads).
 *
 * GraphQL over HTTP is parsed and validated by Apollo (its document store keeps parsed documents by the text's
 * hash); the pipeline takes Apollo's document from there ({@link PreparedDocuments.ofParsed}). graphql-ws and SSE
 * have no Apollo: the pipeline parses and validates them itself, with the same options and rules
 * ({@link PreparedDocuments.prepare}). Either way the decisions below are made once per document.
 */

/** What the pipeline knows of one operation of one document. */
export interface PreparedDocument {
  readonly document: DocumentNode;
  readonly operation: OperationDefinitionNode;
  /** query, mutation or subscription. */
  readonly kind: OperationDefinitionNode["operation"];
  /** Every field it selects is covered by the data version: its answer may be kept by the read cache. */
  readonly cacheable: boolean;
  /** A string literal that breaks the text rule (literal-guard.ts), refused before execution. */
  readonly literalIssue: GraphQLError | null;
  /** The variables its cost estimate reads (`first`/`last` arguments, directives). */
  readonly costVariables: readonly string[];
  /** Estimates that passed the cost limit, per value of those variables (bounded). */
  readonly passedCosts: Map<string, number>;
}

/** How many passing cost estimates are remembered per document (per value of its cost variables). */
const MAX_PASSED_COSTS = 64;
/** How many prepared documents an instance keeps, and how many bytes of text at most. */
const MAX_DOCUMENTS = 2_000;
const MAX_TEXT_BYTES = 32 * 1024 * 1024;

export class PreparedDocuments {
  private readonly prepared: LRUCache<string, PreparedDocument>;
  private readonly lookups: Counter<"result"> | null;
  private readonly validationRules: readonly ValidationRule[];

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly config: Config,
    registry?: Registry,
  ) {
    this.validationRules = [...specifiedRules, ...graphqlValidationRules(config)];
    const prepared = new LRUCache<string, PreparedDocument>({
      max: MAX_DOCUMENTS,
      maxSize: MAX_TEXT_BYTES,
      sizeCalculation: (_entry, key) => Math.max(1, key.length),
    });
    this.prepared = prepared;
    const registers = registry ? [registry] : [];
    this.lookups = registry
      ? new Counter({
          name: "reftrail_prepared_document_lookups_total",
          help: "Operations looked up among the prepared documents, by result (hit: no document work; miss)",
          labelNames: ["result"] as const,
          registers,
        })
      : null;
    if (registry) {
      new Gauge({
        name: "reftrail_prepared_documents",
        help: "Documents prepared once and kept (parsed, validated, limits and cache decision made)",
        registers,
        collect() {
          this.set(prepared.size);
        },
      });
    }
  }

  /**
   * The prepared operation of a document Apollo has parsed and validated already (GraphQL over HTTP); the decisions
   * are made on a first sight of the text and kept.
   */
  ofParsed(text: string, operationName: string | null, document: DocumentNode): PreparedDocument | null {
    const key = keyOf(text, operationName);
    const known = this.prepared.get(key);
    if (known && known.document === document) {
      this.lookups?.inc({ result: "hit" });
      return known;
    }
    this.lookups?.inc({ result: "miss" });
    const operation = getOperationAST(document, operationName);
    if (!operation) return null;
    const prepared = this.decide(document, operation);
    this.prepared.set(key, prepared);
    return prepared;
  }

  /** The operation of this text when it has been prepared already (and is kept): nothing is parsed or counted. */
  peek(text: string, operationName: string | null): PreparedDocument | undefined {
    return this.prepared.peek(keyOf(text, operationName));
  }

  /**
   * Parses and validates like Apollo, with the same options and rules, for the transports Apollo does not serve
   * (graphql-ws, SSE); errors carry the codes Apollo gives them. Only documents that pass are kept.
   */
  prepare(
    text: string,
    operationName: string | null,
    log: { warn(details: object, message: string): void },
  ): PreparedDocument | GraphQLError[] {
    const key = keyOf(text, operationName);
    const known = this.prepared.get(key);
    if (known) {
      this.lookups?.inc({ result: "hit" });
      return known;
    }
    this.lookups?.inc({ result: "miss" });
    let document: DocumentNode;
    try {
      document = parse(text, graphqlParseOptions(this.config));
    } catch (error) {
      // A deeply nested document overflows the parser's stack: say only that it could not be parsed.
      if (!(error instanceof GraphQLError)) {
        log.warn({ err: error }, "GraphQL document could not be parsed");
        return [parseFailedError()];
      }
      return [withCode(error, "GRAPHQL_PARSE_FAILED")];
    }
    // Before validation, as Apollo's first rule: nothing may walk a document whose fragments expand past the limit.
    const tooLarge = checkSelectionLimit(document, this.config);
    if (tooLarge) return [tooLarge];
    const invalid = validate(this.schema, document, this.validationRules);
    if (invalid.length > 0) return invalid.map((error) => withCode(error, "GRAPHQL_VALIDATION_FAILED"));
    const operation = getOperationAST(document, operationName);
    if (!operation) return [withCode(new GraphQLError("Unable to identify the operation to run"), "BAD_REQUEST")];
    const prepared = this.decide(document, operation);
    this.prepared.set(key, prepared);
    return prepared;
  }

  /**
   * What depends on the request's variables: the variables guard, coercion (over HTTP Apollo coerces, so
   * `coerce` is false there), and the cost limit. Returns the estimated cost, or the refusal.
   */
  checkVariables(
    prepared: PreparedDocument,
    operationName: string | null,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    coerce: boolean,
  ): { readonly cost: number } | { readonly errors: readonly GraphQLError[] } {
    if (prepared.literalIssue) return { errors: [prepared.literalIssue] };
    const unsafe = findVariablesIssue(variables ?? undefined);
    if (unsafe)
      return { errors: [variableIssueError(unsafe, unsafe.code === "TOO_DEEP" ? MAX_JSON_DEPTH : undefined)] };
    if (coerce) {
      const coerced = getVariableValues(this.schema, prepared.operation.variableDefinitions ?? [], variables ?? {});
      if (coerced.errors) return { errors: coerced.errors.map((error) => withCode(error, "BAD_USER_INPUT")) };
    }
    const given = variables ?? {};
    // An absent variable takes its definition's default, an explicit null does not: the key tells them apart.
    const values = prepared.costVariables.map((name) => (Object.hasOwn(given, name) ? [given[name]] : []));
    const costKey = JSON.stringify(values);
    const known = prepared.passedCosts.get(costKey);
    if (known !== undefined) return { cost: known };
    const { cost, error } = estimateOperationCost(this.schema, prepared.document, this.config, {
      variables: variables ?? null,
      operationName,
    });
    if (error) return { errors: [error] };
    if (prepared.passedCosts.size >= MAX_PASSED_COSTS) prepared.passedCosts.clear();
    prepared.passedCosts.set(costKey, cost ?? 0);
    return { cost: cost ?? 0 };
  }

  private decide(document: DocumentNode, operation: OperationDefinitionNode): PreparedDocument {
    const literal = findLiteralIssue(document);
    return {
      document,
      operation,
      kind: operation.operation,
      cacheable: isCacheableOperation(this.schema, document, operation),
      literalIssue: literal ? literalIssueError(literal) : null,
      costVariables: costVariables(document),
      passedCosts: new Map(),
    };
  }
}

/** As JSON, so that no two (name, text) pairs spell the same key. */
function keyOf(text: string, operationName: string | null): string {
  return JSON.stringify([operationName, text]);
}

/**
 * The variables an operation's cost depends on: those given to a `first` or `last` argument (the estimator reads
 * only these) or to a directive (`@include`/`@skip` decide which fields count).
 */
function costVariables(document: DocumentNode): readonly string[] {
  const names = new Set<string>();
  const collect = (node: unknown, counts: boolean): void => {
    if (Array.isArray(node)) {
      for (const item of node) collect(item, counts);
      return;
    }
    if (typeof node !== "object" || node === null) return;
    const ast = node as ASTNode & Record<string, unknown>;
    if (ast.kind === Kind.VARIABLE) {
      if (counts) names.add(ast.name.value);
      return;
    }
    if (ast.kind === Kind.VARIABLE_DEFINITION) return;
    const inside =
      counts ||
      ast.kind === Kind.DIRECTIVE ||
      (ast.kind === Kind.ARGUMENT && (ast.name.value === "first" || ast.name.value === "last"));
    for (const [key, value] of Object.entries(ast)) if (key !== "loc") collect(value, inside);
  };
  collect(document, false);
  return [...names].sort();
}

function withCode(error: GraphQLError, code: string): GraphQLError {
  if (typeof error.extensions.code === "string") return error;
  return new GraphQLError(error.message, {
    ...(error.nodes && { nodes: error.nodes }),
    ...(error.source && { source: error.source }),
    ...(error.positions && { positions: error.positions }),
    ...(error.path && { path: error.path }),
    originalError: error.originalError,
    extensions: { ...error.extensions, code },
  });
}
