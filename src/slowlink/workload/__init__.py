"""slowlink.workload"""
