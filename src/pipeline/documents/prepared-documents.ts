import type { FastifyBaseLogger } from "fastify";
import {
  getOperationAST,
  getVariableValues,
  GraphQLError,
  parse,
  specifiedRules,
  validate,
  type DocumentNode,
  type GraphQLSchema,
  type ValidationRule,
} from "graphql";
import type { SubscribePayload } from "graphql-ws";
import type { Config } from "../../config.ts";
import { findVariablesIssue, MAX_JSON_DEPTH } from "../../domain/shared/json-input.ts";
import { parseFailedError, variableIssueError } from "../errors/graphql-errors.ts";
import { findLiteralIssue, literalIssueError } from "./literal-guard.ts";
import { checkOperationCost, graphqlParseOptions, graphqlValidationRules } from "./limits.ts";
import { checkSelectionLimit } from "./selection-limit.ts";

/** An operation that passed every check, ready to execute. */
export interface PreparedOperation {
  readonly document: DocumentNode;
  /** query, mutation or subscription. */
  readonly kind: string;
}

/**
 * What Apollo does to an HTTP operation before executing it, for the operations it does not serve (graphql-ws):
 * parsing with the same limits, the selection limit (first, as Apollo's first rule), validation with the standard
 * rules plus the same depth and alias rules (src/graphql/limits.ts), the variables guard, variable coercion and the
 * cost limit, each refusal coded as Apollo codes it.
 */
export class OperationPreparation {
  private readonly validationRules: readonly ValidationRule[];

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly config: Config,
    private readonly log: FastifyBaseLogger,
  ) {
    this.validationRules = [...specifiedRules, ...graphqlValidationRules(config)];
  }

  /** Parses and validates like Apollo; errors carry the codes Apollo gives them. */
  prepare(payload: SubscribePayload): PreparedOperation | GraphQLError[] {
    const { schema, config, log } = this;
    let document: DocumentNode;
    try {
      document = parse(payload.query, graphqlParseOptions(config));
    } catch (error) {
      // A deeply nested document overflows the parser's stack: say only that it could not be parsed.
      if (!(error instanceof GraphQLError)) {
        log.warn({ err: error }, "GraphQL document could not be parsed");
        return [parseFailedError()];
      }
      return [withCode(error, "GRAPHQL_PARSE_FAILED")];
    }
    // Before validation, as over HTTP: nothing may walk a document whose fragments expand past the limit.
    const tooLarge = checkSelectionLimit(document, config);
    if (tooLarge) return [tooLarge];
    const invalid = validate(schema, document, this.validationRules);
    if (invalid.length > 0) return invalid.map((error) => withCode(error, "GRAPHQL_VALIDATION_FAILED"));
    const operation = getOperationAST(document, payload.operationName ?? null);
    if (!operation) return [withCode(new GraphQLError("Unable to identify the operation to run"), "BAD_REQUEST")];
    const unsafe = findVariablesIssue(payload.variables);
    if (unsafe) return [variableIssueError(unsafe, unsafe.code === "TOO_DEEP" ? MAX_JSON_DEPTH : undefined)];
    const literal = findLiteralIssue(document);
    if (literal) return [literalIssueError(literal)];
    const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], payload.variables ?? {});
    if (coerced.errors) return coerced.errors.map((error) => withCode(error, "BAD_USER_INPUT"));
    const tooCostly = checkOperationCost(schema, document, config, {
      variables: payload.variables ?? null,
      operationName: payload.operationName ?? null,
    });
    if (tooCostly) return [tooCostly];
    return { document, kind: operation.operation };
  }
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
