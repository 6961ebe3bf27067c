import {
  getArgumentValues,
  getNamedType,
  isObjectType,
  Kind,
  type FieldNode,
  type GraphQLField,
  type GraphQLResolveInfo,
  type SelectionSetNode,
  type ValueNode,
} from "graphql";
import type { FirstEventsInput } from "../../domain/lifecycle/lifecycle-log-service.ts";
import type { LifecycleEvent } from "../../domain/lifecycle/lifecycle-event.ts";
import type { Page } from "../../domain/shared/page.ts";
import type { ReferenceEventsArgs } from "../__generated__/resolvers-types.ts";
import { withoutNulls } from "../arguments.ts";
import { bidirectionalPage } from "../pagination.ts";

/*
 * `reference(id) { … events(first: N) { … } }` in one statement. Query.reference looks ahead into its own
 * selection: when every `events` field under it asks for the same first page of the whole log (no filter, no
 * cursor), it reads the reference and that page together (LifecycleLogService.getReferenceWithFirstEvents) and
 * leaves the page here, beside the reference object it returns. Reference.events takes the page when its own
 * arguments ask for exactly that page, and reads as before otherwise: the lookahead only saves a round trip, it
 * never decides an answer. The same lookahead tells whether the events' tag snapshots (`referenceTags`) are
 * selected anywhere under those fields; when they are not, the page is read without them. graphql-js has no
 * lookahead of its own; the resolve info carries the field's nodes, the document's fragments and the coerced
 * variables, which is what Reference.events' arguments are made of.
 */

/** The first page of events left for one reference object by the Query.reference that read it. */
interface PrefetchedEvents {
  readonly input: FirstEventsInput;
  readonly page: Page<LifecycleEvent>;
}

/** Keyed by the reference object itself: dropped with the response, never seen by another request. */
const prefetched = new WeakMap<object, PrefetchedEvents>();

/** Leaves `page`, read with `input`, for the `events` fields of `reference`. */
export function leaveFirstEvents(reference: object, input: FirstEventsInput, page: Page<LifecycleEvent>): void {
  prefetched.set(reference, { input, page });
}

/** A first page of the whole log in the direction and size these arguments ask for; undefined for any other page. */
function firstEventsInput(args: Partial<ReferenceEventsArgs>): FirstEventsInput | undefined {
  if (Object.keys(withoutNulls(args.filter)).length > 0) return undefined;
  let page;
  try {
    page = bidirectionalPage(args);
  } catch {
    // Reference.events refuses these arguments itself, on its own path.
    return undefined;
  }
  if (page.cursor !== undefined) return undefined;
  return { order: "asc", backward: page.direction === "backward", limit: page.limit };
}

/** The page left for `reference` when `args` ask for exactly that one. */
export function takeFirstEvents(
  reference: object,
  args: Partial<ReferenceEventsArgs>,
): Page<LifecycleEvent> | undefined {
  const left = prefetched.get(reference);
  if (left === undefined) return undefined;
  const input = firstEventsInput(args);
  if (input === undefined || input.backward !== left.input.backward || input.limit !== left.input.limit) {
    return undefined;
  }
  return left.page;
}

/**
 * The answers of {@link selectedFirstEvents} that hold for every request of a document, by the field's nodes:
 * compiled queries (src/graphql/compiled-execution.ts) hand every request of a document the same nodes, and when
 * no `events` argument under them is a variable the answer depends on nothing else. Others are worked out anew.
 */
const answersByFieldNodes = new WeakMap<readonly FieldNode[], { readonly input: FirstEventsInput | undefined }>();

/**
 * The one first page that every `events` field selected under this Query.reference field asks for; undefined
 * when none is selected, or when they ask for different pages or for anything but a first page.
 */
export function selectedFirstEvents(info: GraphQLResolveInfo): FirstEventsInput | undefined {
  const known = answersByFieldNodes.get(info.fieldNodes);
  if (known !== undefined) return known.input;
  const referenceType = getNamedType(info.returnType);
  if (!isObjectType(referenceType)) return undefined;
  const eventsField = referenceType.getFields()["events"];
  if (eventsField === undefined) return undefined;
  const fields: FieldNode[] = [];
  const visited = new Set<string>();
  const collect = (selectionSet: SelectionSetNode | undefined) => {
    for (const selection of selectionSet?.selections ?? []) {
      if (selection.kind === Kind.FIELD) {
        if (selection.name.value === "events") fields.push(selection);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        collect(selection.selectionSet);
      } else if (!visited.has(selection.name.value)) {
        visited.add(selection.name.value);
        collect(info.fragments[selection.name.value]?.selectionSet);
      }
    }
  };
  for (const node of info.fieldNodes) collect(node.selectionSet);
  const page = firstPageOf(fields, eventsField, info.variableValues);
  const input = page && { ...page, tagSnapshots: fields.some((field) => selectsField(field, "referenceTags", info)) };
  if (!fields.some(hasVariableArgument)) answersByFieldNodes.set(info.fieldNodes, { input });
  return input;
}

/**
 * Whether a field named `name` is selected anywhere under `field`, through fragments, at any depth and on any type:
 * a yes for a field that is not the event's is only a column read for nothing, a no must never be wrong.
 */
function selectsField(field: FieldNode, name: string, info: GraphQLResolveInfo): boolean {
  const visited = new Set<string>();
  const search = (selectionSet: SelectionSetNode | undefined): boolean =>
    (selectionSet?.selections ?? []).some((selection) => {
      if (selection.kind === Kind.FIELD) return selection.name.value === name || search(selection.selectionSet);
      if (selection.kind === Kind.INLINE_FRAGMENT) return search(selection.selectionSet);
      if (visited.has(selection.name.value)) return false;
      visited.add(selection.name.value);
      return search(info.fragments[selection.name.value]?.selectionSet);
    });
  return search(field.selectionSet);
}

/** The one first page that all of `fields` ask for, or undefined. */
function firstPageOf(
  fields: readonly FieldNode[],
  definition: GraphQLField<unknown, unknown>,
  variables: GraphQLResolveInfo["variableValues"],
): FirstEventsInput | undefined {
  let wanted: FirstEventsInput | undefined;
  for (const field of fields) {
    const input = inputOf(definition, field, variables);
    if (input === undefined) return undefined;
    if (wanted !== undefined && (wanted.backward !== input.backward || wanted.limit !== input.limit)) return undefined;
    wanted = input;
  }
  return wanted;
}

/** Whether any argument of `field` is, or holds, a variable. */
function hasVariableArgument(field: FieldNode): boolean {
  const holdsVariable = (value: ValueNode): boolean =>
    value.kind === Kind.VARIABLE ||
    (value.kind === Kind.LIST && value.values.some(holdsVariable)) ||
    (value.kind === Kind.OBJECT && value.fields.some((entry) => holdsVariable(entry.value)));
  return (field.arguments ?? []).some((argument) => holdsVariable(argument.value));
}

function inputOf(
  definition: GraphQLField<unknown, unknown>,
  node: FieldNode,
  variables: GraphQLResolveInfo["variableValues"],
): FirstEventsInput | undefined {
  try {
    return firstEventsInput(getArgumentValues(definition, node, variables) as Partial<ReferenceEventsArgs>);
  } catch {
    // Arguments graphql-js cannot read are refused on the field's own path when it runs.
    return undefined;
  }
}
