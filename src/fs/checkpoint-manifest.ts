import { z } from 'zod';

/**
 * What a checkpoint keeps of a tree (checkpoint-copy.ts): every entry in walk order (a directory
 * before its content), with its owner, mode and times; a regular file names the object that holds
 * its bytes (`objects/<checkpoint id>/<n>`, a copy berth made and never writes again), shared with
 * the previous checkpoint while the file is unchanged. So an unchanged file costs the next
 * checkpoint one lstat and a line here, no syscall that writes.
 */
const RelPathSchema = z
  .string()
  .max(4096)
  .refine((p) => p.split('/').every((c) => c !== '' && c !== '.' && c !== '..' && !c.includes('\0')), 'is not a path below the root');
/** An object of the tenant's store: the checkpoint that made it, then its number. */
export const ObjectNameSchema = z.string().regex(/^\d{8}T\d{9}Z-[0-9a-f]{6}\/\d+$/, 'is not a checkpoint object');

const meta = {
  p: RelPathSchema,
  u: z.number().int().min(0),
  g: z.number().int().min(0),
  m: z.number().int().min(0).max(0o7777),
  /** atime and mtime, seconds since the epoch. */
  a: z.number(),
  t: z.number(),
};

export const ManifestEntrySchema = z.discriminatedUnion('y', [
  z.object({ y: z.literal('d'), ...meta }).strict(),
  z.object({ y: z.literal('l'), ...meta, to: z.string().max(4096) }).strict(),
  z
    .object({
      y: z.literal('f'),
      ...meta,
      /** The source's "dev:ino:size:mtime_ns:ctime_ns" when it was copied ("changed:…" if it changed while read: never shared). */
      k: z.string(),
      /** Bytes its object takes on disk (0 for a second name of a hard-linked file). */
      b: z.number().int().min(0),
      o: ObjectNameSchema,
      /** A second name of a file hard-linked in the tree: the first name's path. */
      h: RelPathSchema.optional(),
    })
    .strict(),
]);
export type ManifestEntry = z.output<typeof ManifestEntrySchema>;
export type FileEntry = Extract<ManifestEntry, { y: 'f' }>;

/** The root's own metadata, then its entries. */
export const TreeManifestSchema = z
  .object({ root: z.object({ u: meta.u, g: meta.g, m: meta.m, a: meta.a, t: meta.t }).strict(), entries: z.array(ManifestEntrySchema) })
  .strict();
export type TreeManifest = z.output<typeof TreeManifestSchema>;

export const ManifestSchema = z.object({ v: z.literal(1), workspace: TreeManifestSchema, home: TreeManifestSchema }).strict();
export type Manifest = z.output<typeof ManifestSchema>;

/** The objects a manifest's files use. */
export function objectsOf(m: Manifest): Set<string> {
  const out = new Set<string>();
  for (const tree of [m.workspace, m.home]) for (const e of tree.entries) if (e.y === 'f') out.add(e.o);
  return out;
}
