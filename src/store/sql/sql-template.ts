/*
 * Prisma's SQL template tag (`Prisma.sql`, `Prisma.join`, `Prisma.raw`, `Prisma.empty`, and the `Prisma.Sql` they
 * build), imported from the small package that holds it rather than through a generated client: a generated
 * client's module loads all of Prisma's runtime, which the store's statements do not need and which a start or a
 * command should not pay for. Every statement of src/store/sql/ is built with it.
 */
export * as Prisma from "@prisma/client-runtime-utils";
