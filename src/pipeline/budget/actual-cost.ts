import type { DocumentNode, FragmentDefinitionNode, OperationDefinitionNode, SelectionSetNode } from "graphql";
import { Kind } from "graphql";

/*
 * An operation's actual cost: what its execution really touched, counted on the data it returned, in the units of
 * the estimate (src/pipeline/documents/limits.ts, "cost"). Every field present in `data` counts 1, at every place it appears:
 * a list's fields count once per item returned, a field that resolved to null counts 1 and nothing below it.
 * Introspection fields (`__typename`, `__schema`, `__type`) count nothing, as in the estimate. So a page of 3
 * events where 50 were asked for costs what 3 cost, and a reference not found costs 1. A scalar's value is never
 * entered, even when it is an object (the `JSON` of an event's `detail`). The count is capped by the requested
 * cost: the estimate assumes 10 items for a list that is not a connection, and a reference may carry 50 tags.
 *
 * It walks the response once, guided by the operation's selections merged per response key (aliases included,
 * fragments and type conditions merged: validation guarantees one field per response key), computed once per
 * document and operation.
 */

/** Per response key: the selections below the field (null for a leaf), or FREE for an introspection field. */
type Shape = ReadonlyMap<string, Shape | null | typeof FREE>;

const FREE = Symbol("free");

class ShapeBuilder {
  private readonly fragments: ReadonlyMap<string, FragmentDefinitionNode>;

  constructor(document: DocumentNode) {
    this.fragments = new Map(
      document.definitions.flatMap((definition) =>
        definition.kind === Kind.FRAGMENT_DEFINITION ? [[definition.name.value, definition] as const] : [],
      ),
    );
  }

  shapeOf(selectionSets: readonly SelectionSetNode[]): Shape {
    const children = new Map<string, SelectionSetNode[] | null | typeof FREE>();
    const visiting = new Set<string>();
    const collect = (selectionSet: SelectionSetNode): void => {
      for (const selection of selectionSet.selections) {
        if (selection.kind === Kind.FIELD) {
          const key = selection.alias?.value ?? selection.name.value;
          if (selection.name.value.startsWith("__")) {
            children.set(key, FREE);
          } else if (selection.selectionSet) {
            const known = children.get(key);
            if (Array.isArray(known)) known.push(selection.selectionSet);
            else children.set(key, [selection.selectionSet]);
          } else if (!children.has(key)) {
            children.set(key, null);
          }
        } else if (selection.kind === Kind.INLINE_FRAGMENT) {
          collect(selection.selectionSet);
        } else {
          const name = selection.name.value;
          const fragment = this.fragments.get(name);
          // Validation refuses cycles; the guard keeps a walk of an unvalidated document finite all the same.
          if (!fragment || visiting.has(name)) continue;
          visiting.add(name);
          collect(fragment.selectionSet);
          visiting.delete(name);
        }
      }
    };
    for (const selectionSet of selectionSets) collect(selectionSet);
    const shape = new Map<string, Shape | null | typeof FREE>();
    for (const [key, value] of children) {
      shape.set(key, Array.isArray(value) ? this.shapeOf(value) : value);
    }
    return shape;
  }
}

const shapes = new WeakMap<DocumentNode, Map<OperationDefinitionNode, Shape>>();

function operationShape(document: DocumentNode, operation: OperationDefinitionNode): Shape {
  let byOperation = shapes.get(document);
  if (!byOperation) shapes.set(document, (byOperation = new Map()));
  let shape = byOperation.get(operation);
  if (!shape) byOperation.set(operation, (shape = new ShapeBuilder(document).shapeOf([operation.selectionSet])));
  return shape;
}

function countObject(value: Record<string, unknown>, shape: Shape): number {
  let count = 0;
  for (const key in value) {
    const child = shape.get(key);
    if (child === FREE) continue;
    count += 1;
    const fieldValue = value[key];
    if (child && fieldValue !== null && typeof fieldValue === "object") count += countValue(fieldValue, child);
  }
  return count;
}

function countValue(value: object, shape: Shape): number {
  if (!Array.isArray(value)) return countObject(value as Record<string, unknown>, shape);
  let count = 0;
  for (const item of value) {
    if (item !== null && typeof item === "object") count += countValue(item as object, shape);
  }
  return count;
}

/** The actual cost of `operation`'s response `data` (see above), at most `requested`. */
export function actualOperationCost(
  document: DocumentNode,
  operation: OperationDefinitionNode,
  data: unknown,
  requested: number,
): number {
  if (data === null || typeof data !== "object") return 0;
  return Math.min(requested, countValue(data, operationShape(document, operation)));
}
