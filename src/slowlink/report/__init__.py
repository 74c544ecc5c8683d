"""slowlink.report"""
