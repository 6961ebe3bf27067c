import type { ApolloServerPlugin } from "@apollo/server";
import type {
  ASTNode,
  DocumentNode,
  FragmentDefinitionNode,
  GraphQLSchema,
  SelectionSetNode,
  ValidationContext,
  ValidationRule,
} from "graphql";
import { maxAliasesRule } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthRule } from "@escape.tech/graphql-armor-max-depth";
import type { ParseOptions } from "graphql";
import { createComplexityRule, type ComplexityEstimator } from "graphql-query-complexity";
import type { Config } from "../config.ts";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from "../domain/shared/page.ts";
import {
  GraphQLError,
  Kind,
  getNamedType,
  getNullableType,
  isCompositeType,
  isListType,
  validate,
} from "./graphql-js.ts";

/*
 * Limits on the shape of an operation, each with a clear error. Glossary:
 * - depth: how many fields deep the operation's selections nest (`{ a { b } }` is 2; fragments add nothing).
 *   `__schema` does not count, so that GraphiQL's standard introspection query works; introspection has its own
 *   bound instead: `fields`/`inputFields`/`interfaces`/`possibleTypes` may nest at most twice (the rule
 *   graphql-js 17 applies), which the standard query (once) respects.
 * - aliases: how many aliased fields the operation holds (`a: reference(…) b: reference(…)` is 2), which bounds
 *   how many times one field can be asked for in one request.
 * - tokens: the lexical tokens of the document; parsing stops past the maximum, before any work is done.
 * - cost: an estimate of the rows an operation may read. Each field costs 1 plus its children; a connection
 *   multiplies its children by its page size (`first` or `last`, default 50); any other list of objects by
 *   ASSUMED_LIST_SIZE. Introspection costs nothing (bounded as above).
 *
 * Depth and aliases are GraphQL Armor's validation rules (`@escape.tech/graphql-armor-max-*`, the packages its
 * `ApolloArmor` wraps, used directly so that the same rules serve Apollo and graphql-ws); tokens are graphql-js's
 * own `maxTokens` parse option (what Armor's token plugin re-implements with its own lexer). The cost rule needs
 * the variables (`first: $n`), which Apollo does not give to validation rules, so Apollo runs it once the
 * operation is resolved ({@link operationCostPlugin}); graphql-ws runs every check in its `onSubscribe`. Limit
 * errors are GRAPHQL_VALIDATION_FAILED with `extensions.limit = { kind, maximum, actual }` (tokens:
 * GRAPHQL_PARSE_FAILED, from the parser).
 */

/** How many items a list that is not a connection (a reference's tags, its children) is assumed to hold. */
export const ASSUMED_LIST_SIZE = 10;

const MAX_INTROSPECTION_LIST_NESTING = 2;
const INTROSPECTION_LIST_FIELDS = new Set(["fields", "inputFields", "interfaces", "possibleTypes"]);

type LimitKind = "depth" | "aliases" | "cost" | "introspection-depth";

function limitError(
  kind: LimitKind,
  message: string,
  maximum: number,
  actual: number | null,
  nodes?: ASTNode,
): GraphQLError {
  return new GraphQLError(message, {
    ...(nodes && { nodes }),
    extensions: { code: "GRAPHQL_VALIDATION_FAILED", http: { status: 400 }, limit: { kind, maximum, actual } },
  });
}

/**
 * Measures how deeply introspection list fields nest, through fragments. Hand-written: GraphQL Armor's depth rule
 * skips `__schema` entirely, and graphql-js 16 has no such rule yet (17 adds it).
 */
class IntrospectionMeasure {
  private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;

  constructor(document: DocumentNode) {
    this.fragments = new Map(
      document.definitions.flatMap((definition) =>
        definition.kind === Kind.FRAGMENT_DEFINITION ? [[definition.name.value, definition] as const] : [],
      ),
    );
  }

  /** The deepest nesting of introspection list fields below the introspection roots. */
  introspectionNesting(
    selectionSet: SelectionSetNode,
    inIntrospection = false,
    nesting = 0,
    seen = new Set<string>(),
  ): number {
    let deepest = nesting;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        const inside = inIntrospection || name === "__schema" || name === "__type";
        if (!selection.selectionSet || !inside) continue;
        const next = inIntrospection && INTROSPECTION_LIST_FIELDS.has(name) ? nesting + 1 : nesting;
        deepest = Math.max(deepest, this.introspectionNesting(selection.selectionSet, true, next, seen));
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        deepest = Math.max(deepest, this.introspectionNesting(selection.selectionSet, inIntrospection, nesting, seen));
      } else {
        const fragment = this.fragments.get(selection.name.value);
        if (!fragment || seen.has(fragment.name.value)) continue;
        seen.add(fragment.name.value);
        deepest = Math.max(deepest, this.introspectionNesting(fragment.selectionSet, inIntrospection, nesting, seen));
        seen.delete(fragment.name.value);
      }
    }
    return deepest;
  }
}

/** Rejects introspection whose list fields nest deeper than {@link MAX_INTROSPECTION_LIST_NESTING}. */
export function introspectionDepthRule(): ValidationRule {
  return (context: ValidationContext) => {
    const measure = new IntrospectionMeasure(context.getDocument());
    return {
      OperationDefinition(operation) {
        const nesting = measure.introspectionNesting(operation.selectionSet);
        if (nesting > MAX_INTROSPECTION_LIST_NESTING) {
          context.reportError(
            limitError(
              "introspection-depth",
              `The introspection query nests fields/inputFields/interfaces/possibleTypes ${nesting} levels deep; the maximum is ${MAX_INTROSPECTION_LIST_NESTING}.`,
              MAX_INTROSPECTION_LIST_NESTING,
              nesting,
              operation,
            ),
          );
        }
      },
    };
  };
}

/**
 * Armor reports a rejection as a generic "Syntax Error: … limit of N exceeded, found M." and throws it out of
 * validation; instead it is reported as this project's limit error, with the count Armor found.
 */
function reportRejection(kind: LimitKind, maximum: number, message: (actual: number) => string) {
  return (context: ValidationContext | null, error: GraphQLError) => {
    const found = /found (\d+)/.exec(error.message)?.[1];
    const actual = found === undefined ? null : Number(found);
    context?.reportError(limitError(kind, message(actual ?? maximum + 1), maximum, actual));
  };
}

/** Rejects operations nested deeper than `maxDepth` fields (GraphQL Armor). */
export function depthLimitRule(maxDepth: number): ValidationRule {
  return maxDepthRule({
    n: maxDepth,
    ignoreIntrospection: true,
    flattenFragments: true,
    exposeLimits: true,
    propagateOnRejection: false,
    onReject: [
      reportRejection(
        "depth",
        maxDepth,
        (actual) =>
          `The operation is nested ${actual} fields deep; the maximum is ${maxDepth}. Split it into several operations.`,
      ),
    ],
  }) as unknown as ValidationRule;
}

/** Rejects operations with more than `maxAliases` aliased fields (GraphQL Armor; `__typename` aliases are free). */
export function aliasLimitRule(maxAliases: number): ValidationRule {
  return maxAliasesRule({
    n: maxAliases,
    exposeLimits: true,
    propagateOnRejection: false,
    onReject: [
      reportRejection(
        "aliases",
        maxAliases,
        (actual) =>
          `The operation uses ${actual} aliases; the maximum is ${maxAliases}. Split it into several operations.`,
      ),
    ],
  }) as unknown as ValidationRule;
}

const costEstimator: ComplexityEstimator = ({ type, field, args, childComplexity }) => {
  if (field.name.startsWith("__")) return 0;
  // A connection's `edges` list is the page the connection field already multiplied by its size.
  if (type.name.endsWith("Connection")) return 1 + childComplexity;
  const named = getNamedType(field.type);
  if (named.name.endsWith("Connection")) {
    const requested = (args.first ?? args.last ?? DEFAULT_PAGE_SIZE) as unknown;
    // Out-of-range sizes are rejected when the field resolves; here they only must not lower the estimate.
    const size =
      typeof requested === "number" && Number.isFinite(requested)
        ? Math.min(Math.max(requested, 1), MAX_PAGE_SIZE)
        : DEFAULT_PAGE_SIZE;
    return 1 + size * childComplexity;
  }
  if (isListType(getNullableType(field.type)) && isCompositeType(named)) return 1 + ASSUMED_LIST_SIZE * childComplexity;
  return 1 + childComplexity;
};

export interface OperationRequest {
  readonly variables?: Readonly<Record<string, unknown>> | null;
  readonly operationName?: string | null;
}

/** Rejects an operation whose estimated cost exceeds `maxCost`. Needs the operation's variables. */
export function costLimitRule(maxCost: number, request: OperationRequest = {}): ValidationRule {
  return createComplexityRule({
    maximumComplexity: maxCost,
    estimators: [costEstimator],
    variables: { ...request.variables },
    ...(request.operationName ? { operationName: request.operationName } : {}),
    createError: (maximum, actual) =>
      limitError(
        "cost",
        `The operation's estimated cost is ${actual}; the maximum is ${maximum}. Ask for smaller pages (first/last) or fewer nested connections.`,
        maximum,
        actual,
      ),
  });
}

/** The rules that need only the document: add them to Apollo's `validationRules` and to graphql-ws's validation. */
export function graphqlValidationRules(
  config: Pick<Config, "graphqlMaxDepth" | "graphqlMaxAliases">,
): ValidationRule[] {
  return [depthLimitRule(config.graphqlMaxDepth), aliasLimitRule(config.graphqlMaxAliases), introspectionDepthRule()];
}

/** Options for every parse of an operation (Apollo's `parseOptions`, graphql-ws's `parse`). */
export function graphqlParseOptions(config: Pick<Config, "graphqlMaxTokens">): ParseOptions {
  return { maxTokens: config.graphqlMaxTokens };
}

/**
 * The cost check for a validated operation; null when it is within the limit. Use it wherever an operation is
 * about to run (Apollo: {@link operationCostPlugin}; graphql-ws: `onSubscribe`).
 */
export function checkOperationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  config: Pick<Config, "graphqlMaxCost">,
  request: OperationRequest,
): GraphQLError | null {
  try {
    // Only the limit's own error: variables that do not coerce are reported, with their proper code, when
    // the operation executes.
    const errors = validate(schema, document, [costLimitRule(config.graphqlMaxCost, request)]);
    return errors.find((error) => error.extensions.limit !== undefined) ?? null;
  } catch (error) {
    // graphql-query-complexity throws (rather than reports) past its node-count guard.
    if (error instanceof GraphQLError) {
      return limitError(
        "cost",
        `The operation is too large to estimate: ${error.message}`,
        config.graphqlMaxCost,
        null,
      );
    }
    throw error;
  }
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

/** Cost checks passed, per parsed document (Apollo keeps one DocumentNode per query text in its document store). */
interface PassedCostChecks {
  readonly variables: readonly string[];
  readonly passed: Set<string>;
}

/** How many passing (operation, cost variables) combinations are remembered per document. */
const MAX_PASSED_COST_CHECKS = 64;

/**
 * Runs {@link checkOperationCost} before Apollo executes an operation. The check walks the whole operation with
 * graphql-js's validator, as much work as executing a small query, so a pass is remembered per document and
 * per value of the variables the cost depends on: a client repeating one query pays for the check once. Only
 * passes are remembered; an operation over the limit is checked (and refused) every time.
 */
export function operationCostPlugin<Context extends object>(
  config: Pick<Config, "graphqlMaxCost">,
): ApolloServerPlugin<Context> {
  const passedByDocument = new WeakMap<DocumentNode, PassedCostChecks>();
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ schema, document, request }) {
          let checks = passedByDocument.get(document);
          if (!checks) {
            checks = { variables: costVariables(document), passed: new Set() };
            passedByDocument.set(document, checks);
          }
          const variables = request.variables ?? {};
          // An absent variable takes its definition's default, an explicit null does not: the key tells them apart.
          const values = checks.variables.map((name) => (Object.hasOwn(variables, name) ? [variables[name]] : []));
          const key = JSON.stringify([request.operationName ?? null, values]);
          if (checks.passed.has(key)) return;
          const error = checkOperationCost(schema, document, config, {
            variables: request.variables ?? null,
            operationName: request.operationName ?? null,
          });
          if (error) throw error;
          if (checks.passed.size >= MAX_PASSED_COST_CHECKS) checks.passed.clear();
          checks.passed.add(key);
        },
      };
    },
  };
}
