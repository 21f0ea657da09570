"""Drive the cycle engine directly, without lmms-eval's task machinery.

Any object with ``describe(images, prompt, gen_kwargs) -> list[str]`` is a
describer; any generator backend works. Chains land in the artifact store and
resume like the lmms-eval runs do.
"""

from lmms_genbench.data.photos import PACKAGE_PHOTOS, load_package_photo
from lmms_genbench.engine import ArtifactStore, ChainJob, ChainSpec, CycleEngine
from lmms_genbench.generators import build_generator
from lmms_genbench.metrics.scorers.genception import GENCEPTION
from lmms_genbench.models.cycle import build_describer
from lmms_genbench.command.cycle import smoke_describer_args
from lmms_genbench.tasks.mmeception.utils import P_DESC

describer = build_describer("llava_hf", smoke_describer_args())
generator = build_generator("smoke")
spec = ChainSpec.from_request(P_DESC, {"iterations": 3, "max_new_tokens": 32})
store = ArtifactStore("./artifacts")
namespace = store.namespace(describer.name, generator.name, spec.protocol_id("example"))
jobs = [
    ChainJob(cid, spec, store.chain(namespace, cid), lambda cid=cid: [load_package_photo(cid)])
    for cid, _category in PACKAGE_PHOTOS
]
outcomes, stats = CycleEngine(describer, generator).run(jobs)
records = [GENCEPTION.record({"category": "photos"}, o.to_chain("example").to_json()) for o in outcomes]
report = GENCEPTION.score(records, GENCEPTION.resolve({"preset": "smoke"}), length=spec.hops)
print({k: report[k] for k in ("gc@3", "s@1", "s@2", "s@3", "n_scored", "n_failed")})
