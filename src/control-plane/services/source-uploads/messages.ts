// Answers `langgraph deploy` shows as its one-line reason.

/** Why `langgraph deploy --image` (and its local docker build) cannot work here, in the one line the CLI shows. */
export const NO_PUSH_REGISTRY =
  'This agentplane has no registry to push images to, so it hands out no push token: build from source ' +
  '(`langgraph deploy --remote` uploads it and agentplane builds it) or push the image to a registry you manage and ' +
  'deploy it with `langgraph deploy --image-uri <repository>@sha256:<digest>`.';
