import { createHash } from 'node:crypto';
import type { AgentCli } from './agent-clis.js';

/** The label an image carries with the hash of what it was built from. */
export const INPUTS_LABEL = 'berth.image.inputs';

export interface ImageInputs {
  dockerfile: string;
  clis: readonly AgentCli[];
  bridgeSource: string;
  /** The base image's id (not its name: a rebuilt base under the same name is a new input). */
  baseId: string;
}

/** What decides whether an existing image is up to date: equal hash, same build. */
export function imageInputsHash(inputs: ImageInputs): string {
  const canonical = JSON.stringify([
    inputs.dockerfile,
    inputs.clis.map((c) => [c.spec, c.integrity, c.binaries.map((b) => [b.pathInTarball, b.binary])]),
    inputs.bridgeSource,
    inputs.baseId,
  ]);
  return `sha256:${createHash('sha256').update(canonical).digest('hex')}`;
}
