import fs from 'node:fs';
import type { z } from 'zod';
import { errnoOf } from '../errors.js';

/** A berth-owned JSON file, validated by its schema; undefined when it does not exist. */
export function readJsonFile<S extends z.ZodType>(path: string, schema: S): z.output<S> | undefined {
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return undefined;
    throw err;
  }
  return schema.parse(JSON.parse(text));
}
