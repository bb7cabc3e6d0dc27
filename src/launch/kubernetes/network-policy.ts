import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { LABELS } from '../../plan/labels.js';
import { kubeLabelValue } from './claims.js';

/** How berth's own pod is labelled (deploy/): the one place tenant pods may reach. */
export const BERTH_POD_LABELS: Readonly<Record<string, string>> = { 'app.kubernetes.io/name': 'berth' };

/**
 * The namespace's one NetworkPolicy for an installation's tenant pods: nothing comes in; the only
 * way out is berth's gateway port, on berth's own pods (berth in the cluster: its Service's
 * cluster IP is translated to the pod before a CNI applies the policy) and at the relay's address
 * itself (`gatewayIp`/32: berth outside the cluster, reached at a node's or host's address). No DNS:
 * the launcher gives pods an IP.
 */
export function renderNetworkPolicy(opts: {
  namespace: string;
  installation: string;
  gatewayPort: number;
  /** The IPv4 address pods reach the relay at (kubernetes.gateway.address, resolved). */
  gatewayIp?: string;
  berthPodLabels: Readonly<Record<string, string>>;
}): V1NetworkPolicy {
  const ports = [{ protocol: 'TCP', port: opts.gatewayPort }];
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: `berth-tenants-${kubeLabelValue(opts.installation)}`.slice(0, 63),
      namespace: opts.namespace,
      labels: { [LABELS.managed]: 'true', [LABELS.installation]: kubeLabelValue(opts.installation) },
    },
    spec: {
      podSelector: { matchLabels: { [LABELS.managed]: 'true', [LABELS.installation]: kubeLabelValue(opts.installation) } },
      // Ingress in policyTypes with no ingress rule: nothing comes in.
      policyTypes: ['Ingress', 'Egress'],
      egress: [
        { to: [{ podSelector: { matchLabels: { ...opts.berthPodLabels } } }], ports },
        ...(opts.gatewayIp ? [{ to: [{ ipBlock: { cidr: `${opts.gatewayIp}/32` } }], ports }] : []),
      ],
    },
  };
}
