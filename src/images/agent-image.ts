import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import tar from 'tar-fs';
import { ensureAgentBase } from './agent-base.js';
import { AGENT_CLIS } from './agent-clis.js';
import { compileBridge, IMAGES_DIR } from './bridge.js';
import type { ImageStore } from '../launch/images.js';
import { extractCliBinaries, fetchCliTarball } from './fetch-cli.js';
import { imageInputsHash, INPUTS_LABEL } from './image-inputs.js';
import { megabytes, secondsSince, withHeartbeat } from './progress.js';

export interface AgentImageOptions {
  images: ImageStore;
  tag: string;
  /** Where downloaded CLI tarballs are kept between builds. */
  cacheDir: string;
  /** A base from a registry instead of the mmdebstrap one. */
  base?: string;
  /** Build even when the image's inputs label says it is up to date. */
  force?: boolean;
  onProgress: (line: string) => void;
}

/** Build the agent image offline: Debian base, pinned CLIs, berth-bridge; skip it when up to date. */
export async function buildAgentImage(opts: AgentImageOptions): Promise<{ tag: string; built: boolean }> {
  const { images, tag, onProgress } = opts;
  const base = opts.base ?? (await ensureAgentBase(images, onProgress));
  const baseId = (await images.inspect(base))?.id;
  const dockerfile = fs.readFileSync(join(IMAGES_DIR, 'agent', 'Dockerfile'), 'utf8');
  const bridgeSource = join(IMAGES_DIR, 'shell', 'berth-bridge.c');
  // A base not on the engine yet (a registry --base) has no id: build, and it is pulled.
  const hash = baseId ? imageInputsHash({ dockerfile, clis: AGENT_CLIS, bridgeSource: fs.readFileSync(bridgeSource, 'utf8'), baseId }) : '';
  const existing = await images.inspect(tag);
  if (hash && !opts.force && existing?.labels[INPUTS_LABEL] === hash) {
    onProgress(`${tag}: up to date (${megabytes(existing.sizeBytes)}; --force builds it again)`);
    return { tag, built: false };
  }

  const context = fs.mkdtempSync(join(os.tmpdir(), 'berth-image-agent-'));
  try {
    fs.cpSync(join(IMAGES_DIR, 'agent'), context, { recursive: true });
    compileBridge(bridgeSource, join(context, 'berth-bridge'));
    for (const cli of AGENT_CLIS) {
      const tarball = await fetchCliTarball(cli, opts.cacheDir, onProgress);
      const started = Date.now();
      const binaries = await extractCliBinaries(cli, tarball, context);
      const sizes = binaries.map((b, i) => `${cli.binaries[i]?.binary} (${megabytes(fs.statSync(b).size)})`);
      onProgress(`${cli.name} ${cli.version}: ${sizes.join(', ')} extracted in ${secondsSince(started)}`);
    }
    const started = Date.now();
    onProgress(`docker build ${tag} from ${base} (sends about 700 MB of binaries to the engine) ...`);
    await withHeartbeat(`docker build ${tag}`, 'building', onProgress, () =>
      images.build({
        context: tar.pack(context) as unknown as NodeJS.ReadableStream,
        tag,
        buildArgs: { BASE: base, BERTH_INPUTS: hash },
        onProgress,
      }),
    );
    const size = (await images.inspect(tag))?.sizeBytes ?? 0;
    onProgress(`docker build ${tag}: done in ${secondsSince(started)}, image size ${megabytes(size)}`);
    return { tag, built: true };
  } finally {
    fs.rmSync(context, { recursive: true, force: true });
  }
}
