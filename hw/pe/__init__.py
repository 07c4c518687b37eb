"""The DRAM bank processing element (BankPE) and its FP16/FP32 arithmetic units."""
