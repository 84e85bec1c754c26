"""The component's entry: componentize-py exports this module's ``Policy``.

Build (from the repository root):
    componentize-py -d wit/0.3.0/policy.wit -w policy-plugin componentize \\
        -p policies/python/fair-share -p sdk/python app -o fair-share-py.wasm
"""

from fair_share import FairShare
from wasmsched.component import export

Policy = export(FairShare)
