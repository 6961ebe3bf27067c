import type { Driver, Outcome, Page, ReferenceView, TagView } from "./drivers.ts";
import type { TestServer } from "./test-server.ts";

/* The scenario driver for GraphQL: the same operations as the REST driver, through /graphql. */

const REFERENCE_FIELDS = `id containerId billOfLading bookingNumber carrierCode active parent { id } tags { id name }`;

async function execute(server: Pick<TestServer, "url" | "apiKey">, query: string, variables: Record<string, unknown>) {
  const response = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": server.apiKey },
    body: JSON.stringify({ query, variables }),
  });
  return { status: response.status, body: (await response.json()) as { data?: any; errors?: any[] } };
}

function failure(body: { errors?: any[] }): Outcome<never> {
  const error = body.errors?.[0];
  const fields = (body.errors ?? []).flatMap((e) => {
    const issues = (e.extensions?.issues ?? []) as { field?: string }[];
    const fromIssues = issues.flatMap((issue) => (issue.field ? [issue.field] : []));
    const field = typeof e.extensions?.field === "string" ? [e.extensions.field as string] : [];
    return [...field, ...fromIssues].map((path) => path.replace(/^input\./, ""));
  });
  return { ok: false, code: error?.extensions?.code ?? "UNKNOWN", fields, body };
}

function reference(node: any): ReferenceView {
  return {
    id: node.id,
    containerId: node.containerId,
    billOfLading: node.billOfLading,
    bookingNumber: node.bookingNumber,
    carrierCode: node.carrierCode,
    parentReferenceId: node.parent?.id ?? null,
    active: node.active,
    tags: node.tags,
  };
}

const tag = (node: any): TagView => ({ id: node.id, name: node.name });

export function graphqlDriver(server: Pick<TestServer, "url" | "apiKey">): Driver {
  const run = async <T>(
    query: string,
    variables: Record<string, unknown>,
    pick: (data: any) => T | null,
  ): Promise<Outcome<T>> => {
    const { body } = await execute(server, query, variables);
    if (body.errors?.length) return failure(body);
    const value = pick(body.data);
    if (value === null) return { ok: false, code: "NOT_FOUND", fields: [], body };
    return { ok: true, value };
  };
  const referencePage = (connection: any): Page<ReferenceView> => ({
    items: connection.edges.map((edge: any) => reference(edge.node)),
    nextCursor: connection.pageInfo.hasNextPage ? connection.pageInfo.endCursor : null,
  });
  return {
    surface: "graphql",
    createTag: (name) =>
      run(`mutation($name: String!) { createTag(input: { name: $name }) { tag { id name } } }`, { name }, (d) =>
        tag(d.createTag.tag),
      ),
    getTag: (id) => run(`query($id: ID!) { tag(id: $id) { id name } }`, { id }, (d) => (d.tag ? tag(d.tag) : null)),
    listTags: ({ namePrefix, limit, cursor }) =>
      run(
        `query($first: Int, $after: String, $prefix: String) {
          tags(first: $first, after: $after, filter: { namePrefix: $prefix }) { edges { node { id name } } pageInfo { hasNextPage endCursor } }
        }`,
        { first: limit, after: cursor, prefix: namePrefix },
        (d) => ({
          items: d.tags.edges.map((edge: any) => tag(edge.node)),
          nextCursor: d.tags.pageInfo.hasNextPage ? d.tags.pageInfo.endCursor : null,
        }),
      ),
    renameTag: (id, name) =>
      run(
        `mutation($id: ID!, $name: String!) { renameTag(input: { id: $id, name: $name }) { tag { id name } } }`,
        { id, name },
        (d) => tag(d.renameTag.tag),
      ),
    deleteTag: (id) =>
      run(`mutation($id: ID!) { deleteTag(input: { id: $id }) { deletedTagId } }`, { id }, () => true as const),
    createReference: (input) =>
      run(
        `mutation($input: CreateReferenceInput!) { createReference(input: $input) { reference { ${REFERENCE_FIELDS} } } }`,
        { input: { ...input, carrierCode: input.carrierCode ?? "" } },
        (d) => reference(d.createReference.reference),
      ),
    getReference: (id) =>
      run(`query($id: ID!) { reference(id: $id) { ${REFERENCE_FIELDS} } }`, { id }, (d) =>
        d.reference ? reference(d.reference) : null,
      ),
    listReferences: (filter, options = {}) =>
      run(
        `query($first: Int, $after: String, $filter: ReferenceFilter) {
          references(first: $first, after: $after, filter: $filter) { edges { node { ${REFERENCE_FIELDS} } } pageInfo { hasNextPage endCursor } }
        }`,
        {
          first: options.limit,
          after: options.cursor,
          filter: { ...filter, tagMatch: filter.tagMatch?.toUpperCase() },
        },
        (d) => referencePage(d.references),
      ),
    listTagReferences: (tagId, options = {}) =>
      run(
        `query($id: ID!, $first: Int, $after: String) {
          tag(id: $id) { references(first: $first, after: $after) { edges { node { ${REFERENCE_FIELDS} } } pageInfo { hasNextPage endCursor } } }
        }`,
        { id: tagId, first: options.limit, after: options.cursor },
        (d) => (d.tag ? referencePage(d.tag.references) : null),
      ),
    addTags: (referenceId, tags) =>
      run(
        `mutation($input: AddTagsToReferenceInput!) { addTagsToReference(input: $input) { reference { tags { id name } } } }`,
        { input: { referenceId, tags } },
        (d) => d.addTagsToReference.reference.tags.map(tag),
      ),
    removeTag: (referenceId, tagId) =>
      run(
        `mutation($input: RemoveTagFromReferenceInput!) { removeTagFromReference(input: $input) { reference { id } } }`,
        { input: { referenceId, tagId } },
        () => true as const,
      ),
  };
}
