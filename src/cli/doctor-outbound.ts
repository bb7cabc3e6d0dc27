import type { BerthConfig } from '../config/berth-config.js';
import type { ProjectMetadata } from '../config/metadata.js';
import { consumerLock, needsConsumerLock } from '../bridges/start.js';
import { configuredChannels, webChatWords } from '../config/bridges.js';
import type { ChannelCheck } from '../channels/contract.js';
import { liveHolderOf } from '../fs/lock.js';
import { own } from '../base/own.js';

type Check = ChannelCheck;

/**
 * What doctor says about the ways out: projects whose agent needs a model but has none it may
 * call (the agent would fail at its first message), and the chat bridges (is each service there, does it take berth's credentials?).
 */
export function checkModels(config: BerthConfig, projects: Array<{ name: string; metadata: ProjectMetadata }>): Check[] {
  const checks: Check[] = [];
  for (const { name, metadata } of projects) {
    const needsModel = metadata.agent === 'claude' || metadata.agent === 'codex' || metadata.agent === 'droid';
    const usable = metadata.models.upstreams.filter((u) => own(config.models, u));
    const missing = metadata.models.upstreams.filter((u) => !own(config.models, u));
    if (missing.length) {
      const fix = `berth project update ${name} --model <one of: ${Object.keys(config.models).join(', ') || 'none yet'}>, or add it to berth.yaml's models`;
      checks.push({
        name: `models ${name}`,
        status: 'fail',
        detail: `upstream(s) ${missing.join(', ')} not in berth.yaml's models: its agents' model calls fail (${fix})`,
      });
    } else if (needsModel && usable.length === 0) {
      checks.push({
        name: `models ${name}`,
        status: 'warn',
        detail: `agent "${String(metadata.agent)}" needs a model, but the project may call none: berth project update ${name} --model <upstream> (berth.yaml models)`,
      });
    } else if (usable.length)
      checks.push({
        name: `models ${name}`,
        status: 'ok',
        detail: `${usable.join(', ')} through berth's model gateway (keys stay outside)`,
      });
  }
  return checks;
}

/**
 * Every route answers with a project that exists (and a workflow it has): otherwise
 * each message there fails, and only the person in the chat would find out.
 */
export function checkRoutes(config: BerthConfig, workflowsOf: ReadonlyMap<string, readonly string[]>): Check[] {
  const renamed: Check[] =
    config.channels === undefined
      ? []
      : [
          {
            name: 'routes',
            status: 'warn',
            detail: 'berth.yaml names its routes "channels:", their old name: still read, but rename the key to "routes:"',
          },
        ];
  return [
    ...renamed,
    ...Object.entries(config.routes).flatMap(([channel, profile]): Check[] => {
      const workflows = workflowsOf.get(profile.project);
      if (!workflows) {
        const made = [...workflowsOf.keys()];
        return [
          {
            name: `route ${channel}`,
            status: 'fail',
            detail: `answers with project "${profile.project}", which does not exist: its messages fail (berth project create ${profile.project}, or name one of: ${made.join(', ') || 'none yet'})`,
          },
        ];
      }
      if (profile.workflow !== undefined && !workflows.includes(profile.workflow)) {
        return [
          {
            name: `route ${channel}`,
            status: 'fail',
            detail: `runs workflow "${profile.workflow}", which project "${profile.project}" does not have (workflows: ${workflows.join(', ') || 'none'})`,
          },
        ];
      }
      return [
        {
          name: `route ${channel}`,
          status: 'ok',
          detail: `answered by project "${profile.project}"${profile.workflow ? `, workflow "${profile.workflow}"` : ''}`,
        },
      ];
    }),
  ];
}

/**
 * Each model upstream berth.yaml defines, asked one cheap authenticated question (GET /v1/models,
 * the key as berth sends it), with the answer's status: a key refused, a wrong URL or an upstream
 * that does not answer is found here, not by a chat user waiting on their agent.
 */
export async function checkModelUpstreams(config: BerthConfig, timeoutMs = 5000): Promise<Check[]> {
  return Promise.all(
    Object.entries(config.models).map(async ([name, upstream]): Promise<Check> => {
      const url = `${upstream.url.replace(/\/$/, '')}/v1/models`;
      const headers: Record<string, string> =
        upstream.api === 'anthropic'
          ? { 'x-api-key': upstream.api_key, 'anthropic-version': '2023-06-01' }
          : { authorization: `Bearer ${upstream.api_key}` };
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
        await res.body?.cancel();
        if (res.ok) return { name: `model ${name}`, status: 'ok', detail: `${upstream.url} answers with its key (HTTP ${res.status})` };
        if (res.status === 401 || res.status === 403)
          return {
            name: `model ${name}`,
            status: 'fail',
            detail: `${upstream.url} refuses berth.yaml's key (HTTP ${res.status}): every model call fails; set models.${name}.api_key`,
          };
        return {
          name: `model ${name}`,
          status: 'warn',
          detail: `${upstream.url} answered GET /v1/models with HTTP ${res.status}; is models.${name}.url the API's base URL?`,
        };
      } catch (err) {
        const why =
          (err as Error).name === 'TimeoutError'
            ? `no answer in ${timeoutMs / 1000} s`
            : ((err as { cause?: { code?: string; message?: string } }).cause?.code ?? (err as Error).message);
        return {
          name: `model ${name}`,
          status: 'fail',
          detail: `${upstream.url} cannot be reached (${why}): agents' model calls fail; check models.${name}.url`,
        };
      }
    }),
  );
}

/**
 * berth.yaml's transcription upstream, asked without spending anything: its endpoint POSTed a
 * form with the model and no file, the key as berth sends it. An upstream that takes the key
 * answers that the file is missing (400, or 422 from a FastAPI server); 401/403: the key is
 * refused; 404: no such endpoint there. Nothing when berth.yaml has no transcription.
 */
export async function checkTranscription(config: BerthConfig, timeoutMs = 5000): Promise<Check[]> {
  const t = config.transcription;
  if (!t) return [];
  const upstream = own(config.models, t.upstream);
  const name = 'transcription';
  if (!upstream) return [{ name, status: 'fail', detail: `names model upstream "${t.upstream}", which berth.yaml does not define` }];
  const url = `${upstream.url.replace(/\/$/, '')}${t.path}`;
  const form = new FormData();
  form.append('model', t.model);
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${upstream.api_key}` },
      body: form,
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    });
    await res.body?.cancel();
    if (res.status === 400 || res.status === 422)
      return [{ name, status: 'ok', detail: `${url} takes berth's key (model ${t.model}): voice notes become text` }];
    if (res.status === 401 || res.status === 403)
      return [
        {
          name,
          status: 'fail',
          detail: `${url} refuses the key of models.${t.upstream} (HTTP ${res.status}): voice notes are saved, not transcribed`,
        },
      ];
    if (res.status === 404)
      return [{ name, status: 'fail', detail: `${url} is not there (HTTP 404): check transcription.path and models.${t.upstream}.url` }];
    return [
      { name, status: 'warn', detail: `${url} answered a test with HTTP ${res.status}; is it an OpenAI-compatible /audio/transcriptions?` },
    ];
  } catch (err) {
    const why =
      (err as Error).name === 'TimeoutError'
        ? `no answer in ${timeoutMs / 1000} s`
        : ((err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message);
    return [{ name, status: 'fail', detail: `${url} cannot be reached (${why}): voice notes are saved, not transcribed` }];
  }
}

/**
 * Which configured channel a live berth process answers now (berth serve, or berth bridge <name>):
 * a channel nobody consumes leaves its messages waiting, which doctor says. Channels sent their
 * messages by HTTP are answered by berth serve alone: nothing to hold.
 */
export function checkBridgeConsumers(config: BerthConfig, stateDir: string): Check[] {
  return configuredChannels(config.bridges)
    .filter(({ channel, config: c }) => needsConsumerLock(channel, c))
    .map(({ channel }) => {
      const holder = liveHolderOf(consumerLock(stateDir, channel.name));
      const name = `bridge ${channel.name} consumer`;
      return holder
        ? {
            name,
            status: 'ok' as const,
            detail: `berth process ${holder.split('.')[0]} answers it (berth serve or berth bridge ${channel.name})`,
          }
        : {
            name,
            status: 'warn' as const,
            detail: `no running berth answers it: messages wait at ${channel.title} until "berth serve" (or "berth bridge ${channel.name}") runs`,
          };
    });
}

/** The web chat, a chat bridge like the channels: berth serve always answers it (there is nothing outside berth to reach). */
export const checkWebChat = (config: BerthConfig): Check => ({
  name: 'bridge web',
  status: 'ok',
  detail: `berth serve answers it at ${webChatWords(config.bridges)}`,
});

/** Each configured channel's own check (is its service there, does it take berth's credentials, which project answers). */
export async function checkBridges(config: BerthConfig): Promise<Check[]> {
  const checks = await Promise.all(
    configuredChannels(config.bridges).map(({ channel, config: c }) => {
      const profile = own(config.routes, channel.name);
      return channel.doctor(c, profile ? `answers with project "${profile.project}"` : undefined);
    }),
  );
  return checks.flat();
}
