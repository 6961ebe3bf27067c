import type {
  DocumentNode,
  FragmentDefinitionNode,
  GraphQLSchema,
  ParseOptions,
  SelectionSetNode,
  ValidationContext,
  ValidationRule,
} from "graphql";
import { maxAliasesRule } from "@escape.tech/graphql-armor-max-aliases";
import { maxDepthRule } from "@escape.tech/graphql-armor-max-depth";
import { createComplexityRule, type ComplexityEstimator } from "graphql-query-complexity";
import type { Config } from "../../config.ts";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from "../../domain/shared/page.ts";
import { limitError, type LimitKind } from "./limit-error.ts";
import { checkSelectionLimit } from "./selection-limit.ts";
import {
  GraphQLError,
  Kind,
  getNamedType,
  getNullableType,
  isCompositeType,
  isListType,
  validate,
  visitInParallel,
} from "graphql";

/*
 * Limits on the shape of an operation, each with a clear error. Glossary:
 * - depth: how many fields deep the operation's selections nest (`{ a { b } }` is 2; fragments add nothing).
 *   `__schema` does not count, so that GraphiQL's standard introspection query works; introspection has its own
 *   bound instead: `fields`/`inputFields`/`interfaces`/`possibleTypes` may nest at most twice (the rule
 *   graphql-js 17 applies), which the standard query (once) respects.
 * - aliases: how many aliased fields the operation holds (`a: reference(…) b: reference(…)` is 2), which bounds
 *   how many times one field can be asked for in one request.
 * - tokens: the lexical tokens of the document; parsing stops past the maximum, before any work is done.
 * - selections: the fields, fragment spreads and inline fragments an operation makes once its fragments are
 *   expanded (selection-limit.ts). Counted without expanding anything, right after parsing and before any other
 *   check: the checks that follow, graphql-query-complexity's cost walk and execution all follow every spread, so
 *   a document of a few hundred bytes whose fragments spread each other twice would keep them busy for minutes.
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
 * GRAPHQL_PARSE_FAILED, from the parser). Every rule here visits each fragment once.
 */

/** How many items a list that is not a connection (a reference's tags, its children) is assumed to hold. */
export const ASSUMED_LIST_SIZE = 10;

const MAX_INTROSPECTION_LIST_NESTING = 2;
const INTROSPECTION_LIST_FIELDS = new Set(["fields", "inputFields", "interfaces", "possibleTypes"]);

/**
 * Measures how deeply introspection list fields nest, through fragments. Hand-written: GraphQL Armor's depth rule
 * skips `__schema` entirely. Each fragment is measured once per context (inside introspection or not) and the
 * result reused at every spread, so the measure is linear in the document however often fragments are spread.
 */
class IntrospectionMeasure {
  private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  /** Per fragment and context: how deep list fields nest below a spread of it; null while being measured. */
  private readonly fragmentNestings = new Map<string, number | null>();

  constructor(document: DocumentNode) {
    this.fragments = new Map(
      document.definitions.flatMap((definition) =>
        definition.kind === Kind.FRAGMENT_DEFINITION ? [[definition.name.value, definition] as const] : [],
      ),
    );
  }

  /** The deepest nesting of introspection list fields below the introspection roots, within `selectionSet`. */
  introspectionNesting(selectionSet: SelectionSetNode, inIntrospection = false): number {
    let deepest = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        const name = selection.name.value;
        const inside = inIntrospection || name === "__schema" || name === "__type";
        if (!selection.selectionSet || !inside) continue;
        const own = inIntrospection && INTROSPECTION_LIST_FIELDS.has(name) ? 1 : 0;
        deepest = Math.max(deepest, own + this.introspectionNesting(selection.selectionSet, true));
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        deepest = Math.max(deepest, this.introspectionNesting(selection.selectionSet, inIntrospection));
      } else {
        deepest = Math.max(deepest, this.fragmentNesting(selection.name.value, inIntrospection));
      }
    }
    return deepest;
  }

  /** A spread of an unknown fragment, or of one already being measured (a cycle, which validation refuses), adds 0. */
  private fragmentNesting(name: string, inIntrospection: boolean): number {
    const key = `${inIntrospection ? "inside" : "outside"} ${name}`;
    const known = this.fragmentNestings.get(key);
    if (known !== undefined) return known ?? 0;
    const fragment = this.fragments.get(name);
    if (!fragment) return 0;
    this.fragmentNestings.set(key, null);
    const nesting = this.introspectionNesting(fragment.selectionSet, inIntrospection);
    this.fragmentNestings.set(key, nesting);
    return nesting;
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

/**
 * Rejects an operation whose estimated cost exceeds `maxCost`. Needs the operation's variables. The estimate
 * walks the expanded operation, which the selection limit (selection-limit.ts) bounds by `maxSelections` first;
 * its own node guard is set just past that bound, so that it never refuses what the selection limit accepts.
 */
export function costLimitRule(
  maxCost: number,
  maxSelections: number,
  request: OperationRequest = {},
  onEstimate?: (cost: number) => void,
): ValidationRule {
  return createComplexityRule({
    ...(onEstimate ? { onComplete: onEstimate } : {}),
    maximumComplexity: maxCost,
    maxQueryNodes: maxSelections + 1,
    estimators: [costEstimator],
    ...(onEstimate ? { onComplete: onEstimate } : {}),
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

/**
 * The rules that need only the document: add them to Apollo's `validationRules` and to graphql-ws's validation.
 * The selection limit comes first, as soon as validation starts and before any node is visited; a document over
 * it is refused with that one error, and the other limits are not measured. graphql-js's own rules, which Apollo
 * runs in the same pass, still visit it: each visits a fragment once (graphql 16.15), so that stays linear in the
 * document. graphql-ws checks the selection limit before validating at all.
 */
export function graphqlValidationRules(
  config: Pick<Config, "graphqlMaxDepth" | "graphqlMaxAliases" | "graphqlMaxSelections">,
): ValidationRule[] {
  const shapeRules = [
    depthLimitRule(config.graphqlMaxDepth),
    aliasLimitRule(config.graphqlMaxAliases),
    introspectionDepthRule(),
  ];
  const limitsRule: ValidationRule = (context) => {
    const tooLarge = checkSelectionLimit(context.getDocument(), config);
    if (!tooLarge) return visitInParallel(shapeRules.map((rule) => rule(context)));
    context.reportError(tooLarge);
    return {};
  };
  return [limitsRule];
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
  config: Pick<Config, "graphqlMaxCost" | "graphqlMaxSelections">,
  request: OperationRequest,
): GraphQLError | null {
  return estimateOperationCost(schema, document, config, request).error;
}

/** The operation's estimated cost (null when it could not be estimated) and the limit's error, if it is over. */
export function estimateOperationCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  config: Pick<Config, "graphqlMaxCost" | "graphqlMaxSelections">,
  request: OperationRequest,
): { readonly cost: number | null; readonly error: GraphQLError | null } {
  let cost: number | null = null;
  try {
    // Only the limit's own error: variables that do not coerce are reported, with their proper code, when
    // the operation executes.
    const errors = validate(schema, document, [
      costLimitRule(config.graphqlMaxCost, config.graphqlMaxSelections, request, (estimate) => {
        cost = estimate;
      }),
    ]);
    return { cost, error: errors.find((error) => error.extensions.limit !== undefined) ?? null };
  } catch (error) {
    // graphql-query-complexity throws (rather than reports) past its node-count guard.
    if (error instanceof GraphQLError) {
      return {
        cost: null,
        error: limitError(
          "cost",
          `The operation is too large to estimate: ${error.message}`,
          config.graphqlMaxCost,
          null,
        ),
      };
    }
    throw error;
  }
}
