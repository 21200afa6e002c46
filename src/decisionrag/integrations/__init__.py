"""Framework integrations; each module imports its framework lazily and only when imported.

* `decisionrag.integrations.langchain` - a LangChain retriever and decision-model adapters
  (``pip install 'decisionrag[langchain]'``);
* `decisionrag.integrations.llamaindex` - a LlamaIndex retriever and node postprocessor
  (``pip install 'decisionrag[llamaindex]'``).

``import decisionrag`` imports neither framework.
"""
