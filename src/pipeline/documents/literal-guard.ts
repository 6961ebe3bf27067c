import { GraphQLError, Kind, visit, type DocumentNode, type ValueNode } from "graphql";
import type { FieldIssue } from "../../domain/shared/errors.ts";
import { INEXACT_NUMBER, inexactNumberReason } from "../../domain/shared/exact-json.ts";
import { findTextIssue } from "../../domain/shared/json-input.ts";
import { findUnderflowedNumbers } from "../../domain/shared/underflow-scanner.ts";

/*
 * The text rule of variables (src/domain/shared/json-input.ts) for the string literals of a document: an
 * argument or a variable's default value written inline, `createTag(input: { name: "a\u0000b" })`. The GraphQL
 * parser already refuses unpaired surrogates in literals; NUL it accepts (`\u0000` is a legal escape). A float
 * literal that is not zero but parses to 0 (`1e-400`) is refused as variables refuse it (INEXACT_NUMBER).
 */

/** Whether a float literal's text (GraphQL float syntax is JSON's) is a non-zero number that parses to 0. */
function underflows(text: string): boolean {
  return findUnderflowedNumbers(text).length > 0;
}

/**
 * What {@link findLiteralIssue} found, by document: Apollo keeps parsed documents in its own cache, so a repeated
 * query is the same object and its literals, which never change, are walked once rather than on every request.
 */
const issuesByDocument = new WeakMap<DocumentNode, FieldIssue | null>();

/** The first string literal of `document` that is not text this service stores, with its path, or null. */
export function findLiteralIssue(document: DocumentNode): FieldIssue | null {
  let found = issuesByDocument.get(document);
  if (found === undefined) issuesByDocument.set(document, (found = walkLiterals(document)));
  return found;
}

function walkLiterals(document: DocumentNode): FieldIssue | null {
  let found: FieldIssue | null = null;
  visit(document, {
    Argument(node) {
      found ??= valueIssue(node.value, [node.name.value]);
      return false;
    },
    VariableDefinition(node) {
      if (node.defaultValue) found ??= valueIssue(node.defaultValue, [node.variable.name.value]);
      return false;
    },
  });
  return found;
}

function valueIssue(value: ValueNode, path: readonly (string | number)[]): FieldIssue | null {
  if (value.kind === Kind.STRING) {
    const issue = findTextIssue(value.value);
    return issue && { path, ...issue };
  }
  if (value.kind === Kind.FLOAT && underflows(value.value)) {
    return { path, code: INEXACT_NUMBER, message: `this number ${inexactNumberReason(Number.NaN)!}` };
  }
  if (value.kind === Kind.LIST) {
    for (const [index, item] of value.values.entries()) {
      const issue = valueIssue(item, [...path, index]);
      if (issue) return issue;
    }
  }
  if (value.kind === Kind.OBJECT) {
    for (const field of value.fields) {
      const issue = valueIssue(field.value, [...path, field.name.value]);
      if (issue) return issue;
    }
  }
  return null;
}

/** VALIDATION_FAILED naming the literal's argument path, as a variable's issue names the variable's. */
export function literalIssueError(issue: FieldIssue): GraphQLError {
  const field = issue.path.join(".");
  return new GraphQLError(`Argument at "${field}": ${issue.message}`, {
    extensions: { code: "VALIDATION_FAILED", field, issues: [{ field, code: issue.code, message: issue.message }] },
  });
}
