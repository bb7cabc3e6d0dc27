import { z } from 'zod';

/** berth.yaml `checkpoints:`: how many and how much of a session's past each tenant keeps (/undo, /fork). */
export const CheckpointsSchema = z
  .object({
    keep: z
      .number()
      .int()
      .min(0)
      .max(200)
      .default(10)
      .describe(
        'Checkpoints one tenant of a project keeps (over all its sessions); the oldest goes first. 0: none are kept (/undo has nothing to go back to).',
      ),
    max_mb: z
      .number()
      .int()
      .min(1)
      .max(1_048_576)
      .default(1024)
      .describe(
        "MiB one tenant's checkpoints take on disk together, at most the project's disk_mb (its quota): a file unchanged between two checkpoints is stored once.",
      ),
    max_files: z
      .number()
      .int()
      .min(1)
      .max(10_000_000)
      .default(200_000)
      .describe(
        'Files, folders and links one checkpoint may hold: a bigger workspace gets no checkpoint (its run goes on, and says so in the log).',
      ),
  })
  .strict()
  .prefault({});
export type CheckpointsSettings = z.output<typeof CheckpointsSchema>;
