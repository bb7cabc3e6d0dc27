/**
 * The agent CLIs baked into the agent image: the one place their versions are pinned.
 * Each is a native binary inside an npm tarball (no Node at run time). The integrity is the
 * registry's dist.integrity for that exact version, checked against the cached tarball before
 * use, so a tarball in the cache is trusted no more than a fresh download.
 * Droid is not on npm: it is left out (a deployment with network can add it via --base).
 */
export interface AgentCli {
  /** Name in progress lines. */
  name: string;
  /** What `npm pack` fetches. */
  spec: string;
  version: string;
  /** npm's dist.integrity for `spec` (Subresource Integrity: sha512-<base64>). */
  integrity: string;
  /** The binaries it brings: each one's path inside the tarball, and its file name in the image's /usr/local/bin (and in the build context). */
  binaries: ReadonlyArray<{ pathInTarball: string; binary: string }>;
}

export const AGENT_CLIS: readonly AgentCli[] = [
  {
    name: 'claude-code',
    spec: '@anthropic-ai/claude-code-linux-x64@2.1.330',
    version: '2.1.330',
    integrity: 'sha512-9Gn+V7DtJ8M1nztP9CeDVl9g3RtrepI7rOFTyPRRnZe8D6zebIHKmC7OvBauucuAP0X0k85SDN/LPVZyjsGezQ==',
    // A glibc binary: the wrapper package's postinstall would copy it over bin/claude.exe.
    binaries: [{ pathInTarball: 'package/claude', binary: 'claude' }],
  },
  {
    name: 'codex',
    spec: '@openai/codex@0.169.0-linux-x64',
    version: '0.169.0',
    integrity: 'sha512-o05NyAOCDygSPRo1yinzxvkRSdmsZyBD9E7mbpmjRanSfM8lypqWtQgEo4XfNkwhuCR2aFu8mlGOsQGFXVbVww==',
    // Static musl binaries. The code-mode host (70 MB) is needed: Codex runs its tools through it
    // by default and, without it, fails closed ("Code Mode is unavailable … host executable was
    // not found": no command runs at all, measured with 0.169.0). The bwrap sandbox and the voice
    // libraries stay out: berth's container is the sandbox.
    binaries: [
      { pathInTarball: 'package/vendor/x86_64-unknown-linux-musl/bin/codex', binary: 'codex' },
      { pathInTarball: 'package/vendor/x86_64-unknown-linux-musl/bin/codex-code-mode-host', binary: 'codex-code-mode-host' },
    ],
  },
];
