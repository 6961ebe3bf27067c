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
 * SPEC §13: depth and cost limits with a clear error. Glossary:
 * - depth: how many fields deep the operation's selections nest (`{ a { b } }` is 2). Introspection
 *   (`__schema`, `__type`, `__typename`) does not count, so that GraphiQL's standard introspection query works;
 *   introspection has its own bound instead: `fields`/`inputFields`/`interfaces`/`possibleTypes` may nest at
 *   most twice (the rule graphql-js 17 applies), which the standard query (once) respects.
 * - cost: an estimate of the rows an operation may read. Each field costs 1 plus its children; a connection
 *   multiplies its children by its page size (`first` or `last`, default 50); any other list of objects by
 *   ASSUMED_LIST_SIZE. Introspection costs nothing (bounded as above).
 *
 * The depth rule needs only the document, so it is an ordinary validation rule. The cost rule needs the
 * variables (`first: $n`), which Apollo does not give to validation rules, so Apollo runs it once the
 * operation is resolved ({@link operationCostPlugin}); graphql-ws can run both in its `onSubscribe`.
 * Both report GRAPHQL_VALIDATION_FAILED with `extensions.limit = { kind, maximum, actual }`.
 */

/** How many items a list that is not a connection (a reference's tags, its children) is assumed to hold. */
export const ASSUMED_LIST_SIZE = 10;

const MAX_INTROSPECTION_LIST_NESTING = 2;
const INTROSPECTION_LIST_FIELDS = new Set(["fields", "inputFields", "interfaces", "possibleTypes"]);

type LimitKind = "depth" | "cost" | "introspection-depth";

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

/** Walks selection sets through fragments; a fragment cycle (reported by the standard rules) counts as 0. */
class SelectionMeasure {
  private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;
  private readonly depthOfFragment = new Map<string, number>();
  private readonly visiting = new Set<string>();

  constructor(document: DocumentNode) {
    this.fragments = new Map(
      document.definitions.flatMap((definition) =>
        definition.kind === Kind.FRAGMENT_DEFINITION ? [[definition.name.value, definition] as const] : [],
      ),
    );
  }

  /** Depth of the non-introspection selections. */
  depth(selectionSet: SelectionSetNode): number {
    let deepest = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        if (selection.name.value.startsWith("__")) continue;
        deepest = Math.max(deepest, 1 + (selection.selectionSet ? this.depth(selection.selectionSet) : 0));
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        deepest = Math.max(deepest, this.depth(selection.selectionSet));
      } else {
        deepest = Math.max(deepest, this.fragmentDepth(selection.name.value));
      }
    }
    return deepest;
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

  private fragmentDepth(name: string): number {
    const known = this.depthOfFragment.get(name);
    if (known !== undefined) return known;
    const fragment = this.fragments.get(name);
    if (!fragment || this.visiting.has(name)) return 0;
    this.visiting.add(name);
    const depth = this.depth(fragment.selectionSet);
    this.visiting.delete(name);
    this.depthOfFragment.set(name, depth);
    return depth;
  }
}

/** Rejects operations nested deeper than `maxDepth` fields, and deeply nested introspection. */
export function depthLimitRule(maxDepth: number): ValidationRule {
  return (context: ValidationContext) => {
    const measure = new SelectionMeasure(context.getDocument());
    return {
      OperationDefinition(operation) {
        const depth = measure.depth(operation.selectionSet);
        if (depth > maxDepth) {
          context.reportError(
            limitError(
              "depth",
              `The operation is nested ${depth} fields deep; the maximum is ${maxDepth}. Split it into several operations.`,
              maxDepth,
              depth,
              operation,
            ),
          );
        }
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
export function graphqlValidationRules(config: Pick<Config, "graphqlMaxDepth">): ValidationRule[] {
  return [depthLimitRule(config.graphqlMaxDepth)];
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

/** Runs {@link checkOperationCost} before Apollo executes an operation. */
export function operationCostPlugin<Context extends object>(
  config: Pick<Config, "graphqlMaxCost">,
): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ schema, document, request }) {
          const error = checkOperationCost(schema, document, config, {
            variables: request.variables ?? null,
            operationName: request.operationName ?? null,
          });
          if (error) throw error;
        },
      };
    },
  };
}
