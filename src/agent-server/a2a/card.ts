// An assistant's A2A agent card, one document for both dialects: the 0.3 fields (url, protocolVersion,
// preferredTransport, capabilities, skills) that 0.3 clients read, and 1.0's supportedInterfaces, where a 1.0 client
// finds the same URL at protocol 1.0 (listed first) and 0.3. Both dialects are served on that one URL, so a client
// reading either half of the card reaches the server in the dialect it speaks.
export interface CardAssistant {
  assistant_id: string;
  graph_id: string;
  name?: string | null;
  description?: string | null;
}

export function agentCard(a: CardAssistant, baseUrl: string, version: string, takesMessages: boolean) {
  const url = `${baseUrl}/a2a/${encodeURIComponent(a.assistant_id)}`;
  const name = a.name || a.graph_id;
  const description =
    a.description ||
    `The "${name}" agent (LangGraph graph ${a.graph_id}). Text parts ${
      takesMessages ? 'become user messages' : 'are not taken: send the input as a data part'
    }; data parts (JSON objects) merge into its input.`;
  const modes = takesMessages ? ['text/plain', 'application/json'] : ['application/json'];
  return {
    name,
    description,
    version,
    url,
    protocolVersion: '0.3.0',
    preferredTransport: 'JSONRPC',
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ],
    capabilities: { streaming: true, pushNotifications: true, stateTransitionHistory: false },
    defaultInputModes: modes,
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [
      {
        id: a.graph_id,
        name,
        description,
        tags: ['langgraph', a.graph_id],
        examples: [],
        inputModes: modes,
        outputModes: ['text/plain', 'application/json'],
      },
    ],
  };
}
