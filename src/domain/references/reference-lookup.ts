import type { TaggedReference } from "../models.ts";
import { notFound } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import type { Store } from "../store.ts";

/** The organization's reference with its tags. @throws NOT_FOUND (also for a malformed id or another's reference). */
export async function findReferenceIn(store: Store, organizationId: string, id: string): Promise<TaggedReference> {
  const [reference] = isUuid(id) ? await store.references.findReferencesByIds(organizationId, [id.toLowerCase()]) : [];
  if (!reference) throw notFound("reference");
  return reference;
}

/**
 * Like findReferenceIn, holding the reference until the transaction ends (ReferenceRepository.lockReference):
 * concurrent changes of one reference run one after another. @throws NOT_FOUND
 */
export async function lockReferenceIn(store: Store, organizationId: string, id: string): Promise<TaggedReference> {
  const reference = isUuid(id) ? await store.references.lockReference(organizationId, id.toLowerCase()) : null;
  if (!reference) throw notFound("reference");
  return reference;
}
