import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { gqlData } from "./support/graphql-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Relations are read through per-request DataLoaders: the number of SQL statements of a query depends on its
 * shape, not on how many rows it returns. Counted with the statement hook of the test server (every
 * statement Prisma sends), reset right before each request.
 */

const CHILD_COUNT = 100;

function containerNumber(serial: number): string {
  const firstTen = `MSCU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

const REFERENCES_WITH_RELATIONS = `
  query ($first: Int!) {
    references(first: $first) {
      edges { node { id tags { id name } parent { id tags { id } } children { id } } }
    }
  }`;

const TAGS_WITH_REFERENCES = `
  query ($first: Int!) {
    tags(first: $first) {
      edges { node { id name references(first: 3) { edges { node { id } } pageInfo { hasNextPage } } } }
    }
  }`;

interface ReferenceNode {
  id: string;
  tags: { id: string; name: string }[];
  parent: { id: string; tags: { id: string }[] } | null;
  children: { id: string }[];
}

describe.each(DATABASE_KINDS)("GraphQL relations are batched on %s", (kind) => {
  let server: TestServer;
  let statements = 0;
  let parentId: string;
  let parentTagIds: string[];

  /** Runs one operation and returns its data and the number of SQL statements it caused. */
  async function measure<Data>(
    query: string,
    variables: Record<string, unknown>,
  ): Promise<{ data: Data; statements: number }> {
    statements = 0;
    const data = await gqlData<Data>(server, query, variables);
    return { data, statements };
  }

  beforeAll(async () => {
    // The webhook worker polls the outbox on a timer; its statements would land in the counts at random.
    server = await startTestServer(kind, { onQuery: () => void statements++, env: { WEBHOOK_WORKER: "off" } });
    // Stand-alone containers first (so they are older than every child), each with its own tag, for Tag.references.
    for (let index = 0; index < 12; index++) {
      await gqlData(
        server,
        `mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
        {
          input: {
            containerId: containerNumber(900 + index),
            carrierCode: "MAEU",
            tags: [{ name: `lane-${index}` }, { name: "priority" }],
          },
        },
      );
    }
    const created = await gqlData(
      server,
      `mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id tags { id } } } }`,
      {
        input: {
          billOfLading: "MEDU-BL-1",
          carrierCode: "MSCU",
          tags: [{ name: "priority" }, { name: "customer:acme" }],
        },
      },
    );
    parentId = created.createReference.reference.id;
    parentTagIds = created.createReference.reference.tags.map((tag: { id: string }) => tag.id).sort();
    // A hundred children, the newest references: `references(first: 10)` and `(first: 100)` both return only
    // children, so that both ask for the same relations.
    const containerIds = Array.from({ length: CHILD_COUNT }, (_, index) => containerNumber(index + 1));
    const reported = await gqlData(
      server,
      `mutation ($input: ReportChildContainersInput!) { reportChildContainers(input: $input) { children { id } } }`,
      { input: { referenceId: parentId, containerIds } },
    );
    expect(reported.reportChildContainers.children).toHaveLength(CHILD_COUNT);
  }, 120_000);

  afterAll(async () => {
    await server?.close();
  });

  it("reads references with tags, parent and children in as many statements for 100 rows as for 10", async () => {
    const ten = await measure<{ references: { edges: { node: ReferenceNode }[] } }>(REFERENCES_WITH_RELATIONS, {
      first: 10,
    });
    const hundred = await measure<{ references: { edges: { node: ReferenceNode }[] } }>(REFERENCES_WITH_RELATIONS, {
      first: 100,
    });

    expect(ten.data.references.edges).toHaveLength(10);
    expect(hundred.data.references.edges).toHaveLength(100);
    expect(hundred.statements).toBe(ten.statements);
    // Authentication, the listing, and one batch per relation: a small constant.
    expect(hundred.statements).toBeLessThanOrEqual(12);
  });

  it("returns every child with its parent, and the parent's tags copied once onto each child", async () => {
    const { data } = await measure<{ references: { edges: { node: ReferenceNode }[] } }>(REFERENCES_WITH_RELATIONS, {
      first: 100,
    });
    const nodes = data.references.edges.map((edge) => edge.node);
    expect(nodes).toHaveLength(CHILD_COUNT);
    for (const child of nodes) {
      expect(child.parent?.id).toBe(parentId);
      expect(child.tags.map((tag) => tag.id).sort()).toEqual(parentTagIds);
      expect(child.parent!.tags.map((tag) => tag.id).sort()).toEqual(parentTagIds);
      expect(child.children).toEqual([]);
    }

    const parent = await gqlData(server, `query ($id: ID!) { reference(id: $id) { children { id parent { id } } } }`, {
      id: parentId,
    });
    expect(parent.reference.children).toHaveLength(CHILD_COUNT);
    expect(new Set(parent.reference.children.map((child: { id: string }) => child.id)).size).toBe(CHILD_COUNT);
  });

  it("reads the references of many tags in as many statements as of two", async () => {
    type TagsData = {
      tags: {
        edges: {
          node: { name: string; references: { edges: { node: { id: string } }[]; pageInfo: { hasNextPage: boolean } } };
        }[];
      };
    };
    const two = await measure<TagsData>(TAGS_WITH_REFERENCES, { first: 2 });
    const all = await measure<TagsData>(TAGS_WITH_REFERENCES, { first: 14 });

    expect(all.data.tags.edges).toHaveLength(14);
    expect(all.statements).toBe(two.statements);
    const byName = new Map(all.data.tags.edges.map((edge) => [edge.node.name, edge.node.references]));
    // "priority" is on the parent, its 100 children and the 12 containers: a full page and more to come.
    expect(byName.get("priority")!.edges).toHaveLength(3);
    expect(byName.get("priority")!.pageInfo.hasNextPage).toBe(true);
    expect(byName.get("lane-3")!.edges).toHaveLength(1);
    expect(byName.get("lane-3")!.pageInfo.hasNextPage).toBe(false);
  });

  it("continues a tag's references from a batched first page's cursor", async () => {
    const first = await gqlData(
      server,
      `{ tags(first: 1, filter: { namePrefix: "priority" }) { edges { node { references(first: 50) { edges { node { id } } pageInfo { hasNextPage endCursor } } } } } }`,
    );
    const page = first.tags.edges[0].node.references;
    expect(page.pageInfo.hasNextPage).toBe(true);
    const next = await gqlData(
      server,
      `query ($after: String) { tags(first: 1, filter: { namePrefix: "priority" }) { edges { node { references(first: 200, after: $after) { edges { node { id } } pageInfo { hasNextPage } } } } } }`,
      { after: page.pageInfo.endCursor },
    );
    const rest = next.tags.edges[0].node.references;
    const ids = [...page.edges, ...rest.edges].map((edge: { node: { id: string } }) => edge.node.id);
    expect(ids).toHaveLength(1 + CHILD_COUNT + 12);
    expect(new Set(ids).size).toBe(ids.length);
    expect(rest.pageInfo.hasNextPage).toBe(false);
  });
});
