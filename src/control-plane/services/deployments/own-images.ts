// Images in the platform's build registry belong to their deployment. The cluster pulls them with the platform's
// pull Secret, which reads every workspace's repository; so a revision naming another deployment's repository there
// (another workspace's source build, or what another workspace pushed with its push token) would run, and disclose,
// code that is not its own. Images elsewhere are the workspace's business: its own pull secrets decide.
import { deploymentName, imageRepositoryOf } from '../../../resources/names.ts';

/** The repository of an image reference: without `@digest` and without a `:tag` after the last slash. */
function repositoryOf(imageUri: string): string {
  const bare = imageUri.replace(/^[a-z]+:\/\//i, '').split('@')[0]!;
  const slash = bare.lastIndexOf('/');
  const colon = bare.lastIndexOf(':');
  return colon > slash ? bare.slice(0, colon) : bare;
}

/** Host compared without case (DNS), the path as is. */
function canonical(repository: string): string {
  const slash = repository.indexOf('/');
  return slash < 0 ? repository.toLowerCase() : repository.slice(0, slash).toLowerCase() + repository.slice(slash);
}

/**
 * Why `imageUri` may not be a revision's image of deployment `deploymentId` (undefined while it is being created:
 * nothing can have been pushed for it yet), or undefined when it may. `ownOnly` (internal_docker, images pushed with
 * a push token): only the deployment's own repository, wherever else the image is.
 */
export function foreignImageProblem(
  buildRegistry: string | undefined,
  deploymentId: string | undefined,
  imageUri: string | null | undefined,
  ownOnly = false,
): string | undefined {
  if (!imageUri) return undefined;
  if (!buildRegistry) {
    return ownOnly
      ? 'This control plane has no build registry (--registry), so it takes no pushed (internal_docker) images.'
      : undefined;
  }
  const prefix = canonical(buildRegistry.replace(/\/+$/, ''));
  const repository = canonical(repositoryOf(imageUri));
  if (!ownOnly && repository !== prefix && !repository.startsWith(`${prefix}/`)) return undefined;
  const own = deploymentId && canonical(imageRepositoryOf(prefix, deploymentName(deploymentId)));
  if (own && repository === own) return undefined;
  return (
    `source_revision_config.image_uri ${imageUri} is ${ownOnly ? 'an internal_docker image' : `in the platform's build registry (${buildRegistry})`} but not ` +
    (own
      ? `in this deployment's repository ${own}: push the image there (POST /v2/deployments/${deploymentId}/push-token).`
      : 'in a repository of this deployment: create the deployment first, then push to its repository with a push ' +
        'token (POST /v2/deployments/<id>/push-token) and name that image.')
  );
}
