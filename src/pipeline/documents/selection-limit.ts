import type {
  DocumentNode,
  FragmentDefinitionNode,
  GraphQLError,
  OperationDefinitionNode,
  SelectionSetNode,
} from "graphql";
import type { Config } from "../../config.ts";
import { Kind } from "graphql";
import { limitError } from "./limit-error.ts";

/*
 * Glossary: a selection is one entry of a selection set (a field, a fragment spread or an inline fragment); an
 * operation's expanded selections are those it makes once every fragment spread is replaced by its fragment's
 * selections, recursively. A document of a few hundred bytes can expand exponentially (fragment i spreading
 * fragment i + 1 twice doubles the count per fragment), so anything that walks the expansion must be refused
 * before it starts; this count is the check, and it never expands anything. The other limits are in limits.ts.
 */

/**
 * How many selections each operation of `document` makes once its fragments are expanded. Each fragment is
 * counted once and its count reused at every spread, so this costs one walk of the document whatever the size
 * of the expansion. Counts past 2^53 are approximate (and may be Infinity): they only need to compare with a
 * limit. A spread of an unknown fragment, or of a fragment already being counted (a cycle), counts as the spread
 * alone: validation refuses both.
 */
export function countExpandedSelections(document: DocumentNode): Map<OperationDefinitionNode, number> {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  /** Per fragment: its expanded selections once counted, null while being counted. */
  const counted = new Map<string, number | null>();

  const fragmentSelections = (name: string): number => {
    const known = counted.get(name);
    if (known !== undefined) return known ?? 0;
    const fragment = fragments.get(name);
    if (!fragment) return 0;
    counted.set(name, null);
    const count = selectionsIn(fragment.selectionSet);
    counted.set(name, count);
    return count;
  };

  const selectionsIn = (selectionSet: SelectionSetNode): number => {
    let count = 0;
    for (const selection of selectionSet.selections) {
      count += 1;
      if (selection.kind === Kind.FRAGMENT_SPREAD) count += fragmentSelections(selection.name.value);
      else if (selection.selectionSet) count += selectionsIn(selection.selectionSet);
    }
    return count;
  };

  const counts = new Map<OperationDefinitionNode, number>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.OPERATION_DEFINITION) counts.set(definition, selectionsIn(definition.selectionSet));
  }
  return counts;
}

/**
 * The selection limit for a parsed document; null when every operation is within it. Run it before anything else
 * walks the document: Apollo's validation runs it first (limits.ts, `graphqlValidationRules`), graphql-ws before
 * validating (src/pipeline/documents/prepared-documents.ts).
 */
export function checkSelectionLimit(
  document: DocumentNode,
  config: Pick<Config, "graphqlMaxSelections">,
): GraphQLError | null {
  const maximum = config.graphqlMaxSelections;
  for (const [operation, count] of countExpandedSelections(document)) {
    if (count <= maximum) continue;
    const actual = Number.isSafeInteger(count) ? count : null;
    const made = actual ?? `more than ${Number.MAX_SAFE_INTEGER}`;
    return limitError(
      "selections",
      `The operation makes ${made} selections once its fragments are expanded; the maximum is ${maximum}. ` +
        "Spread fewer fragments, or split the operation.",
      maximum,
      actual,
      operation,
    );
  }
  return null;
}
