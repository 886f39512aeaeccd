"""Prints, as one JSON line, the first line of the error torch.distributed raises for each mistake of
TorchMessagesOracleTest, on a one-rank gloo group (torch 2.x and 1.x alike); null where no error is raised."""
import json

import torch
import torch.distributed as dist


def first_line(call):
    try:
        call()
    except Exception as e:  # the text is what is compared, whatever the type
        return str(e).splitlines()[0]
    return None


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
cases = {
    "gather_dtype": lambda: dist.gather(torch.zeros(2), [torch.zeros(2, dtype=torch.int64)], dst=0),
    "scatter_dtype": lambda: dist.scatter(torch.zeros(2, dtype=torch.int32), [torch.zeros(2, dtype=torch.float16)],
                                          src=0),
    "reduce_scatter_length": lambda: dist.reduce_scatter(torch.zeros(2), [torch.zeros(2), torch.zeros(2)]),
    "new_group_duplicate": lambda: dist.new_group([0, 0]),
    "new_group_too_many": lambda: dist.new_group([0, 1]),
    "new_group_out_of_range": lambda: dist.new_group([5]),
}
print(json.dumps({"version": torch.__version__, **{k: first_line(v) for k, v in cases.items()}}))
